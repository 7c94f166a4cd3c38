"""A case folder's case.json: read, its schema version checked, and its fields (all of CaseData but the tensors,
models and log) parsed with a clear CaseError for anything malformed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fuzzer.cases.case import EXPECTATIONS, SCHEMA_VERSION
from fuzzer.cases.diagnosis import Blame, CrossCheck, Repair
from fuzzer.cases.remedy import Bisection, Workaround
from fuzzer.converters import CONVERTERS
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.support.device import DEVICES
from fuzzer.support.errors import UsageError
from generators.ir import Graph, GraphError
from generators.values import ValueStrategy
from oracles.verdict import Verdict

CASE_JSON = "case.json"


class CaseError(UsageError):
    """A case folder that cannot be read: missing file, malformed JSON, unknown schema, truncated data."""


def read_file(folder: Path, rel: str) -> bytes:
    """The bytes of one file of a case folder; a missing or unreadable file is a CaseError."""
    try:
        return (folder / rel).read_bytes()
    except FileNotFoundError:
        raise CaseError(f"{folder}: missing {rel}") from None
    except OSError as exc:
        raise CaseError(f"{folder}: cannot read {rel}: {exc.strerror}") from None


REDUCED_SUFFIX = "-reduced"  # a case's minimized case is the folder <case>/<id>-reduced inside it


def reduced_folder(case_dir: Path) -> Path | None:
    """The minimized case inside a case folder, once the reducer wrote one (its case.json there)."""
    try:
        inside = sorted(case_dir.iterdir())
    except OSError:  # not a folder, or not yet
        return None
    return next((p for p in inside if p.is_dir() and p.name.endswith(REDUCED_SUFFIX) and (p / CASE_JSON).is_file()),
                None)


# Written into a case folder whose own graph, checked alone in a fresh process, did not show its bug (the campaign's
# worker died or hung of what it had run before): kept, since nothing found is dropped, but no report to file.
UNREPRODUCED_NOTE = "NOT_REPRODUCED.txt"


def reproduces_alone(case_dir: Path) -> bool:
    """False for a case folder the reducer marked as not showing its bug outside the campaign's worker."""
    return not (case_dir / UNREPRODUCED_NOTE).is_file()


# case.json's record of the case's repro.py run in a fresh process (fuzzer/cases/fresh_replay.py).
REPLAY_KEY = "replay"


def replayed(case_dir: Path) -> bool | None:
    """Whether the case's repro.py, run in a fresh process, showed its bug: True, False, or None where no such
    replay is recorded (or it ran past its timeout)."""
    try:
        record = json.loads((case_dir / CASE_JSON).read_text(encoding="utf-8")).get(REPLAY_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    found = record.get("reproduces") if isinstance(record, dict) else None
    return found if isinstance(found, bool) else None


def case_reproduces(case_dir: Path, chosen: Path) -> bool | None:
    """The reproduces flag of a case folder and the case triage reads in it (its reduced case, or itself): False
    where the reducer marked it, else what a fresh replay of `chosen` recorded (None: never replayed)."""
    return False if not reproduces_alone(case_dir) else replayed(chosen)


def reduction_polished(record: Mapping[str, Any] | None) -> bool:
    """False only for the reduction record of a shape-only first step (`polished: false`), still to polish."""
    return bool((record or {}).get("polished", True))


def is_polished(reduced: Path) -> bool:
    """The reduced case's folder holds no shape-only step's case; one that cannot be read counts as polished
    (reading it again says why)."""
    try:
        return reduction_polished(json.loads((reduced / CASE_JSON).read_text()).get("reduction"))
    except (OSError, ValueError):
        return True


def case_folder(path: Path) -> Path:
    """The case folder `path` names: the folder itself, or the one holding it when `path` is its case.json."""
    return path.parent if path.name == CASE_JSON else path


def load_case_json(folder: Path) -> dict[str, Any]:
    """The JSON object of folder/case.json, of this convsmith's schema version."""
    text = read_file(folder, CASE_JSON)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CaseError(f"{folder}: case.json is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CaseError(f"{folder}: case.json must hold a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise CaseError(f"{folder}: unknown case schema_version {version!r} (this convsmith reads {SCHEMA_VERSION})")
    return data


def case_fields(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """CaseData's fields held in case.json (all but the tensors, models and log), checked; any problem is a
    CaseError naming `where`."""
    try:
        graph = Graph.from_json(data["graph"])
        verdict = Verdict.from_json(data["verdict"])
        fields = {name: data[name] for name in ("id", "signature", "seed", "converter", "created")}
        options = recorded_options(data["converter"], data["converter_options"])
        versions = dict(data["versions"])
        input_names, output_names = tuple(data["input_names"]), tuple(data["output_names"])
        cross_checks, suggested_fix = _diagnosis(data)
        blame = Blame.from_json(data["blame"]) if data.get("blame") else None
        remedies = _remedies(data)
    except KeyError as exc:
        raise CaseError(f"{where}: case.json lacks the field {exc.args[0]!r}") from None
    except (GraphError, TypeError, ValueError, AttributeError) as exc:
        raise CaseError(f"{where}: malformed case.json ({type(exc).__name__}: {exc})") from None
    expectation = data.get("expectation")
    if expectation not in EXPECTATIONS:
        raise CaseError(f"{where}: expectation must be null, 'bug' or 'pass', not {expectation!r}")
    if not isinstance(fields["seed"], int):
        raise CaseError(f"{where}: seed must be an integer")
    return {**fields, "graph": graph, "converter_options": options, "verdict": verdict, "versions": versions,
            "input_names": input_names, "output_names": output_names, "original": data.get("original"),
            "reduction": data.get("reduction"), "expectation": expectation, "cross_checks": cross_checks,
            "suggested_fix": suggested_fix, "blame": blame, **remedies, **_run_settings(data, where)}


def _run_settings(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The device, dynamic axes and value strategy the case ran with; cases written before each was recorded
    read as they ran (the CPU, a static export, uniform values)."""
    device = data.get("device", "cpu")
    if device not in DEVICES:
        raise CaseError(f"{where}: device must be one of {', '.join(DEVICES)}, not {device!r}")
    dynamic = data.get("dynamic")
    try:
        if dynamic is not None:
            DynamicAxes.from_json(dynamic)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CaseError(f"{where}: malformed 'dynamic' in case.json ({type(exc).__name__}: {exc})") from None
    values = data.get("values", ValueStrategy.UNIFORM.value)
    if values not in {v.value for v in ValueStrategy}:
        raise CaseError(f"{where}: values must be one of {', '.join(v.value for v in ValueStrategy)}, not {values!r}")
    return {"device": device, "dynamic": dynamic, "values": values}


def _diagnosis(data: Mapping[str, Any]) -> tuple[tuple[CrossCheck, ...] | None, Repair | None]:
    """The cross-checks and suggested fix of case.json; absent (cases written before diagnosis) reads as None."""
    checks, fix = data.get("cross_checks"), data.get("suggested_fix")
    return (None if checks is None else tuple(CrossCheck.from_json(c) for c in checks),
            None if fix is None else Repair.from_json(fix))


def _remedies(data: Mapping[str, Any]) -> dict[str, Any]:
    """The workaround and bisection of case.json; absent (not searched, not bisected) reads as None."""
    workaround, bisection = data.get("workaround"), data.get("bisection")
    return {"workaround": None if workaround is None else Workaround.from_json(workaround),
            "bisection": None if bisection is None else Bisection.from_json(bisection)}


def recorded_options(converter: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """A case's converter options, with the value of each option its converter gained since the case was written
    (the behaviour the case ran with)."""
    known = CONVERTERS.get(converter)
    return {**(known.options_type.older_defaults if known is not None else {}), **options}
