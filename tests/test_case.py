"""The case folder: round trip, atomic first-writer-wins, and one clear CaseError per kind of damage."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hand_graphs import conv_relu_add

from fuzzer.cases.case import CaseData
from fuzzer.cases.folder import CaseError, read_case, write_case
from fuzzer.support.errors import UsageError
from fuzzer.support.files import recover_interrupted_writes
from oracles.verdict import Stage, Symptom, Verdict


def make_case(case_id: str = "crash-x-node_conversion-E-0123456789ab") -> CaseData:
    graph = conv_relu_add()
    weights = {w: np.full(t.shape, 0.5, dtype=np.float32) for w, t in graph.weights.items()}
    inputs = tuple(np.arange(np.prod(t.shape), dtype=np.float32).reshape(t.shape) for t in graph.inputs.values())
    outs = tuple(np.ones(graph.types[o].shape, dtype=np.float32) for o in graph.outputs)
    verdict = Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, "x", signature=case_id, message="E: boom")
    return CaseData(id=case_id, signature=case_id, graph=graph, seed=3, converter="x", converter_options={"opset": 17},
                    verdict=verdict, versions={"onnx": "1"}, input_names=tuple(graph.inputs),
                    output_names=tuple(graph.outputs), created="2024-01-01T00:00:00+00:00", weights=weights,
                    inputs=inputs, expected=outs, reference=tuple(o.astype(np.float64) for o in outs),
                    model=None, log="trace\n")


def test_round_trip(tmp_path: Path) -> None:
    case = make_case()
    folder = write_case(tmp_path, case)
    back = read_case(folder)
    assert back.to_json() == case.to_json()
    assert back.log == "trace\n" and back.model is None
    assert all(np.array_equal(a, b) for a, b in zip(back.inputs, case.inputs, strict=True))
    assert sorted(back.weights) == sorted(case.weights)
    assert back.reference[0].dtype == np.float64
    assert (folder / "graph.dot").exists()
    assert [p.name for p in tmp_path.iterdir()] == [case.id]  # no staging left
    assert (folder / "repro.py").exists() and (folder / "report.md").exists()


def test_case_folders_are_readable_by_the_group(tmp_path: Path) -> None:
    """Temp-file helpers make 0700 folders and 0600 files; a published case has the user's usual modes."""
    import os
    import stat

    folder = write_case(tmp_path, make_case())
    old = os.umask(0o022)
    os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~old
    for path in folder.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~old, path.name


def test_bfloat16_and_model_round_trip(tmp_path: Path) -> None:
    import onnx
    from onnx import helper

    node = helper.make_node("Identity", ["a"], ["b"])
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi("a", 1, [1])], [vi("b", 1, [1])])
    model = helper.make_model(graph).SerializeToString()
    case = make_case()
    x = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    case = CaseData(**{**case.__dict__, "inputs": (x, *case.inputs[1:]), "model": model})
    back = read_case(write_case(tmp_path, case))
    assert back.inputs[0].dtype == ml_dtypes.bfloat16 and back.inputs[0].tolist() == x.tolist()
    assert back.model == model and onnx.load_from_string(back.model).graph.node[0].op_type == "Identity"


def test_first_writer_wins_unless_replace(tmp_path: Path) -> None:
    first = write_case(tmp_path, make_case())
    other = CaseData(**{**make_case().__dict__, "seed": 99})
    assert write_case(tmp_path, other) == first and read_case(first).seed == 3
    assert read_case(write_case(tmp_path, other, replace=True)).seed == 99
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_what_a_killed_write_left_is_undone_and_a_moved_aside_case_put_back(tmp_path: Path) -> None:
    kept = write_case(tmp_path, make_case())
    moved = write_case(tmp_path, make_case("crash-x-node_conversion-E-ba9876543210"))
    # A write killed mid-swap: the old folder moved aside, its successor never renamed in.
    moved.rename(tmp_path / f".old-{moved.name}-a1b2c3d4")
    (tmp_path / f".tmp-{moved.name}-e5f6g7h8").mkdir()
    (tmp_path / f".tmp-{moved.name}-e5f6g7h8" / "log.txt").write_text("half")
    # A swap killed after its successor was in: the old copy is redundant.
    (tmp_path / f".old-{kept.name}-i9j0k1l2").mkdir()
    (tmp_path / ".meta.json.x7y8z9.tmp").write_bytes(b"{")
    assert recover_interrupted_writes(tmp_path) == [moved.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kept.name, moved.name])
    assert read_case(moved).signature == moved.name and read_case(kept).seed == 3
    assert recover_interrupted_writes(tmp_path) == []


@pytest.mark.parametrize("damage, message", [
    ("missing_json", "missing case.json"),
    ("bad_json", "not valid JSON"),
    ("schema", "unknown case schema_version 2"),
    ("no_field", "lacks the field 'seed'"),
    ("truncated_pb", "test_data_set_0/input_0.pb is truncated"),
    ("missing_pb", "missing test_data_set_0/output_0.pb"),
    ("truncated_model", "model.onnx is truncated"),
    ("device", "device must be one of cpu, cuda, not 'tpu'"),
])
def test_damage_is_one_clear_case_error(tmp_path: Path, damage: str, message: str) -> None:
    case = CaseData(**{**make_case().__dict__, "model": b"\x08\x07" + b"\x3a" + b"\x00"})
    folder = write_case(tmp_path, case)
    data = json.loads((folder / "case.json").read_text())
    if damage == "missing_json":
        (folder / "case.json").unlink()
    elif damage == "bad_json":
        (folder / "case.json").write_text("{not json")
    elif damage in ("schema", "no_field", "device"):
        data.update({"schema_version": 2} if damage == "schema" else {"device": "tpu"} if damage == "device" else {})
        data.pop("seed") if damage == "no_field" else None
        (folder / "case.json").write_text(json.dumps(data))
    elif damage == "truncated_pb":
        path = folder / "test_data_set_0" / "input_0.pb"
        path.write_bytes(path.read_bytes()[:-3])
    elif damage == "missing_pb":
        (folder / "test_data_set_0" / "output_0.pb").unlink()
    else:
        (folder / "model.onnx").write_bytes(b"\x08")
    with pytest.raises(CaseError) as info:
        read_case(folder)
    assert isinstance(info.value, UsageError)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match="not a case folder"):
        read_case(tmp_path / "nope")


def test_the_device_is_recorded_and_old_cases_ran_on_the_cpu(tmp_path: Path) -> None:
    folder = write_case(tmp_path, CaseData(**{**make_case().__dict__, "device": "cuda"}))
    assert read_case(folder).device == "cuda"
    assert "DEVICE = 'cuda'" in (folder / "repro.py").read_text()
    data = json.loads((folder / "case.json").read_text())
    del data["device"]  # as written before devices were recorded
    (folder / "case.json").write_text(json.dumps(data))
    assert read_case(folder).device == "cpu"


def test_a_case_without_tensors_still_writes_its_report(tmp_path: Path) -> None:
    """A worker that died leaves no tensors: the case of a real converter is written, its report says so."""
    import dataclasses

    case = dataclasses.replace(make_case(), converter="torch-onnx-script", weights={}, inputs=(), expected=(),
                               reference=())
    folder = write_case(tmp_path, case)
    report = (folder / "report.md").read_text()
    assert "```python" not in report and "repro.py" in report


def test_a_case_a_worker_sends_writes_the_folder_the_worker_would_have_written(tmp_path: Path) -> None:
    """Workers send their cases to the campaign, which writes the folders (fuzzer/cases/wire.py): every file, models
    and bfloat16 tensors and a dynamic export's second data set included, is the same byte for byte."""
    from onnx import helper

    from fuzzer.cases.wire import case_from_message, case_message

    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "g", [vi("a", 1, [1])], [vi("b", 1, [1])])
    model = helper.make_model(graph).SerializeToString()
    case = make_case()
    bf16 = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    case = CaseData(**{**case.__dict__, "inputs": (bf16, *case.inputs[1:]), "model": model, "upstream_model": model,
                       "second_inputs": case.inputs, "second_expected": case.expected,
                       "second_reference": case.reference})
    sent = case_from_message(json.loads(json.dumps(case_message(case))))  # as it crosses the pipe
    ours, theirs = write_case(tmp_path / "worker", case), write_case(tmp_path / "campaign", sent)
    files = sorted(str(p.relative_to(ours)) for p in ours.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(theirs)) for p in theirs.rglob("*") if p.is_file())
    assert {"model.onnx", "upstream.onnx", "weights/w0.pb", "test_data_set_1/reference_0.pb"} <= set(files)
    assert all((ours / f).read_bytes() == (theirs / f).read_bytes() for f in files)


def test_a_malformed_case_message_is_one_case_error() -> None:
    from fuzzer.cases.wire import case_from_message, case_message

    msg = case_message(make_case())
    msg["case"]["seed"] = "three"
    with pytest.raises(CaseError, match=r"^a worker's case message: seed must be an integer$"):
        case_from_message(msg)
