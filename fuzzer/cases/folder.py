"""The bug case folder on disk: written atomically (staged, then renamed), read back with checks.

Layout (schema_version 1; see shared/DESIGN.md):
  case.json               id, signature, graph, seed, converter(+options), verdict, versions, names, created,
                          original, reduction, expectation, cross_checks, suggested_fix and blame (null until
                          the case is diagnosed), and "files": {relative path: sha256} of every data file, so a
                          truncated or edited file is caught on read.
  model.onnx              the target ONNX model, where one exists
  weights/<name>.pb       every weight as a TensorProto
  test_data_set_0/        input_<i>.pb, output_<i>.pb (float32 eager source), reference_<i>.pb (float64)
  test_data_set_1/        the same at a dynamic export's second shape, where it has one
  graph.dot, log.txt      picture and traceback/timings
  repro.py, report.md     the standalone reproduction and the issue text
No pickle anywhere: tensors are TensorProto bytes, everything else JSON or text. Files and folders are made
readable by the group and others, like any output (a campaign on a shared box is read by teammates).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from fuzzer.cases.case import CaseData
from fuzzer.cases.case_json import CASE_JSON, CaseError, case_fields, case_folder, load_case_json, read_file
from fuzzer.cases.report import render_report
from fuzzer.cases.repro import render_repro
from fuzzer.converters.base import Converter
from fuzzer.support.files import STAGING_PREFIX, atomic_publish_dir, make_shared, moved_aside
from fuzzer.support.tensors import from_proto_bytes
from generators.dot import to_dot
from oracles.paths import portable

MODEL = "model.onnx"
UPSTREAM_MODEL = "upstream.onnx"
DATA_DIR = "test_data_set_0"
SECOND_DATA_DIR = "test_data_set_1"  # a dynamic export's second shape
WEIGHTS_DIR = "weights"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def _proto_bytes(name: str, x: np.ndarray) -> bytes:
    return onnx.numpy_helper.from_array(np.asarray(x), name=name).SerializeToString()


def _data_files(case: CaseData) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if case.model is not None:
        files[MODEL] = bytes(case.model)
    if case.upstream_model is not None:
        files[UPSTREAM_MODEL] = bytes(case.upstream_model)
    for name, value in case.weights.items():
        if not _SAFE_NAME.match(name):
            raise ValueError(f"weight name {name!r} is not a safe file name")
        files[f"{WEIGHTS_DIR}/{name}.pb"] = _proto_bytes(name, value)
    groups = ((DATA_DIR, "input", case.inputs, case.input_names),
              (DATA_DIR, "output", case.expected, case.output_names),
              (DATA_DIR, "reference", case.reference, case.output_names),
              (SECOND_DATA_DIR, "input", case.second_inputs, case.input_names),
              (SECOND_DATA_DIR, "output", case.second_expected, case.output_names),
              (SECOND_DATA_DIR, "reference", case.second_reference, case.output_names))
    for folder, kind, arrays, names in groups:
        for i, value in enumerate(arrays):
            name = names[i] if i < len(names) else f"{kind}_{i}"
            files[f"{folder}/{kind}_{i}.pb"] = _proto_bytes(name, value)
    return files


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_case(out_dir: Path, case: CaseData, replace: bool = False, converter: Converter | None = None) -> Path:
    """Write `case` as out_dir/<case.id>/, atomically (staged beside it, then renamed); returns the folder.

    When the folder already exists it is kept as it is (the first writer wins) unless `replace` is set, in which
    case the old folder is swapped out after the new one is complete. `converter`: the registry entry the case was
    found with, for its repro.py, when it is not one of CONVERTERS.
    """
    out_dir = Path(out_dir)
    if not _SAFE_NAME.match(case.id):
        raise ValueError(f"case id {case.id!r} is not a safe folder name")
    final = out_dir / case.id
    if final.exists() and not replace:
        return final
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=f"{STAGING_PREFIX}{case.id[:60]}-"))
    try:
        make_shared(staging)
        files = _data_files(case)
        for rel, data in files.items():
            _write(staging / rel, data)
        _write(staging / "graph.dot", to_dot(case.graph).encode("utf-8"))
        _write(staging / "log.txt", case.log.encode("utf-8"))
        _write(staging / "repro.py", portable(render_repro(case, converter)).encode("utf-8"))
        _write(staging / "report.md", portable(render_report(case)).encode("utf-8"))
        digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
        # A plain write: the folder is published by one rename once complete, so no reader sees it half-written,
        # and its data files are not synced either (an fsync of this one file cost a millisecond of a case's five,
        # paid by the worker between tests). A folder cut short by a power loss fails its read with a CaseError.
        _write(staging / CASE_JSON, (portable(json.dumps(case.to_json(digests), indent=1)) + "\n").encode("utf-8"))
        if replace and final.exists():
            return _swap(staging, final)
        atomic_publish_dir(staging, final)
        return final
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish_case_folder(written: Path, final: Path) -> Path:
    """Move the complete case folder `written` (on final's file system) to `final`, swapping out one there."""
    if final.exists():
        return _swap(written, final)
    written.rename(final)
    return final


def _swap(staging: Path, final: Path) -> Path:
    old = moved_aside(final, staging)
    final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


# ---- reading ------------------------------------------------------------------------------------------------

def _tensor(folder: Path, rel: str, digests: Mapping[str, str] | None) -> tuple[str, np.ndarray]:
    data = read_file(folder, rel)
    _check_digest(folder, rel, data, digests)
    try:
        return from_proto_bytes(data)
    except Exception as exc:  # a truncated proto or a size that does not match its dims
        raise CaseError(f"{folder}: {rel} is truncated or not a TensorProto ({exc})") from None


def _check_digest(folder: Path, rel: str, data: bytes, digests: Mapping[str, str] | None) -> None:
    if digests is not None and rel in digests and hashlib.sha256(data).hexdigest() != digests[rel]:
        raise CaseError(f"{folder}: {rel} is truncated or modified (sha256 differs from case.json)")


def _indexed(folder: Path, kind: str, count: int, digests: Mapping[str, str] | None,
             data_dir: str = DATA_DIR) -> tuple[np.ndarray, ...]:
    """kind_0.pb ... kind_<count-1>.pb; all absent is allowed (a case without data), a gap is not."""
    paths = [f"{data_dir}/{kind}_{i}.pb" for i in range(count)]
    present = [(folder / p).exists() or (digests is not None and p in digests) for p in paths]
    if not any(present):
        return ()
    return tuple(_tensor(folder, p, digests)[1] for p in paths)


def read_case(path: Path | str) -> CaseData:
    """Read and validate a case folder (or its case.json); any problem is a CaseError with one clear line."""
    path = Path(path)
    folder = case_folder(path)
    if not folder.is_dir():
        raise CaseError(f"{folder}: not a case folder (no such directory)")
    data = load_case_json(folder)
    digests = data.get("files")
    if digests is not None and not isinstance(digests, dict):
        raise CaseError(f"{folder}: case.json 'files' must be an object")
    fields = case_fields(data, str(folder))
    model = _read_model(folder, MODEL, digests)
    upstream_model = _read_model(folder, UPSTREAM_MODEL, digests)
    weights = {}
    for name in fields["graph"].weights:
        rel = f"{WEIGHTS_DIR}/{name}.pb"
        if (folder / rel).exists() or (digests is not None and rel in digests):
            weights[name] = _tensor(folder, rel, digests)[1]
    inputs, outputs = len(fields["input_names"]), len(fields["output_names"])
    return CaseData(
        **fields, weights=weights,
        inputs=_indexed(folder, "input", inputs, digests),
        expected=_indexed(folder, "output", outputs, digests),
        reference=_indexed(folder, "reference", outputs, digests),
        model=model, upstream_model=upstream_model, log=_read_text(folder, "log.txt"),
        second_inputs=_indexed(folder, "input", inputs, digests, SECOND_DATA_DIR),
        second_expected=_indexed(folder, "output", outputs, digests, SECOND_DATA_DIR),
        second_reference=_indexed(folder, "reference", outputs, digests, SECOND_DATA_DIR),
    )


def _read_model(folder: Path, name: str, digests: Mapping[str, str] | None) -> bytes | None:
    if not (folder / name).exists():
        if digests is not None and name in digests:
            raise CaseError(f"{folder}: missing {name}")
        return None
    data = read_file(folder, name)
    _check_digest(folder, name, data, digests)
    try:
        proto = onnx.load_from_string(data)
    except Exception as exc:  # protobuf DecodeError is private
        raise CaseError(f"{folder}: {name} is truncated or not an ONNX model ({exc})") from None
    if not proto.HasField("graph"):
        raise CaseError(f"{folder}: {name} is truncated (no graph)")
    return data


def _read_text(folder: Path, rel: str) -> str:
    try:
        return (folder / rel).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def load_case(path: Path) -> CaseData:
    """read_case, plus: every data file case.json lists must be present (a missing input is bad input)."""
    case = read_case(path)
    folder = case_folder(path)
    listed = json.loads((folder / CASE_JSON).read_text(encoding="utf-8")).get("files") or {}
    for rel in sorted(listed):
        if not (folder / rel).is_file():
            raise CaseError(f"{folder}: missing {rel}")
    return case
