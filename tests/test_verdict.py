"""Tests for oracles.verdict and oracles.rerun: taxonomy, JSON round trip, flakiness, import purity."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from oracles.compare import OutputComparison, compare
from oracles.rerun import FLAKY_LABEL, RerunResult, check_rerun, mark_flaky, outputs_identical
from oracles.verdict import Stage, Symptom, Verdict, symptom_of

F32 = np.float32


@pytest.mark.parametrize(
    "symptom, is_bug",
    [
        (Symptom.PASS, False),
        (Symptom.UNSUPPORTED, False),
        (Symptom.CRASH, True),
        (Symptom.PROCESS_DEATH, True),
        (Symptom.HANG, True),
        (Symptom.OUT_OF_MEMORY, True),
        (Symptom.INVALID_MODEL, True),
        (Symptom.WRONG_SHAPE, True),
        (Symptom.WRONG_DTYPE, True),
        (Symptom.WRONG_VALUES, True),
        (Symptom.FLAKY, False),
    ],
)
def test_symptom_is_bug(symptom: Symptom, is_bug: bool) -> None:
    assert symptom.is_bug is is_bug
    assert Symptom.from_json_name(symptom.json_name) is symptom


def test_symptoms_are_ordered() -> None:
    assert list(Symptom) == sorted(Symptom) and Symptom.PASS < Symptom.CRASH < Symptom.WRONG_VALUES


def test_source_stage_is_never_a_bug() -> None:
    assert not Verdict(Symptom.CRASH, Stage.SOURCE, "torch.onnx").is_bug
    assert Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, "torch.onnx").is_bug


def _metrics_ok_bad() -> tuple[OutputComparison, OutputComparison]:
    ok = compare(np.ones(2, F32), np.ones(2, F32), "float32")
    bad = compare(np.array([1.0, np.nan], F32), np.ones(2, F32), "float32")
    return ok, bad


@pytest.mark.parametrize(
    "reasons, expected",
    [
        ([], Symptom.PASS),
        (["ok"], Symptom.PASS),
        (["values"], Symptom.WRONG_VALUES),
        (["values", "shape"], Symptom.WRONG_SHAPE),
        (["dtype", "values"], Symptom.WRONG_DTYPE),
    ],
)
def test_symptom_of_metrics(reasons: list[str], expected: Symptom) -> None:
    ok, bad = _metrics_ok_bad()
    shape = compare(np.ones(3, F32), np.ones(2, F32), "float32")
    dtype = compare(np.ones(2, np.float64), np.ones(2, F32), "float32")
    table = {"ok": ok, "values": bad, "shape": shape, "dtype": dtype}
    assert symptom_of([table[r] for r in reasons]) is expected


def test_verdict_json_round_trip() -> None:
    ok, bad = _metrics_ok_bad()
    verdict = Verdict(
        Symptom.WRONG_VALUES, Stage.RUNTIME_EXECUTION, "torch.onnx+ort", (ok, bad), "wrong_values-x-abc",
        "output 1 differs", ("rounding_tie",), "floor", "float32",
    )
    text = json.dumps(verdict.to_json(), allow_nan=False, sort_keys=True)
    assert Verdict.from_json(json.loads(text)) == verdict
    assert json.loads(text)["symptom"] == "wrong_values" and json.loads(text)["stage"] == "runtime_execution"


def test_with_labels_sorted_unique() -> None:
    verdict = Verdict(Symptom.PASS, Stage.NONE, "c", labels=("b",)).with_labels("a", "b")
    assert verdict.labels == ("a", "b")


def _wrong(signature: str = "s", oks: tuple[bool, ...] = (False,)) -> Verdict:
    ok, bad = _metrics_ok_bad()
    return Verdict(Symptom.WRONG_VALUES, Stage.RUNTIME_EXECUTION, "c", tuple(ok if o else bad for o in oks), signature)


@pytest.mark.parametrize(
    "second, outs, expected",
    [
        (_wrong(), None, RerunResult(False, "stable")),
        (Verdict(Symptom.PASS, Stage.NONE, "c"), None, RerunResult(True, "symptom")),
        (_wrong(signature="other"), None, RerunResult(True, "symptom")),
        (_wrong(oks=(True,)), None, RerunResult(True, "symptom")),
        (_wrong(), ([np.array([1.0], F32)], [np.array([1.0], F32)]), RerunResult(False, "stable")),
        (_wrong(), ([np.array([1.0], F32)], [np.array([1.0000001], F32)]), RerunResult(True, "outputs")),
        (_wrong(), ([np.array([0.0], F32)], [np.array([-0.0], F32)]), RerunResult(True, "outputs")),
        (_wrong(), ([np.array([1.0], F32)], []), RerunResult(True, "output-count")),
    ],
)
def test_check_rerun(second: Verdict, outs: tuple | None, expected: RerunResult) -> None:
    first_outputs, second_outputs = outs if outs else (None, None)
    assert check_rerun(_wrong(), second, first_outputs, second_outputs) == expected


def test_mark_flaky() -> None:
    first = _wrong()
    assert mark_flaky(first, RerunResult(False, "stable")) is first
    flaky = mark_flaky(first, RerunResult(True, "outputs"))
    assert flaky.symptom is Symptom.FLAKY and not flaky.is_bug
    assert flaky.labels == ("first:wrong_values", FLAKY_LABEL)


def test_outputs_identical_checks_dtype_and_shape() -> None:
    assert outputs_identical([np.zeros((2, 1), F32)], [np.zeros((2, 1), F32)])
    assert not outputs_identical([np.zeros((2, 1), F32)], [np.zeros((1, 2), F32)])
    assert not outputs_identical([np.zeros(2, F32)], [np.zeros(2, np.float64)])


def test_oracles_import_no_converter_or_torch() -> None:
    code = (
        "import sys, oracles.compare, oracles.verdict, oracles.blame, oracles.discontinuity, oracles.signature, "
        "oracles.rerun; bad = [m for m in ('onnx', 'onnxruntime', 'torch', 'z3') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
