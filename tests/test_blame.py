"""Tests for oracles.blame and oracles.discontinuity: whose error is a divergence, and which inputs excuse it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from generators.ops.discontinuity import (
    BRANCH_CUT,
    CAST_OUT_OF_RANGE,
    COMPARISON_TIE,
    EQUAL_IN_ARGMAX,
    ROUNDING_TIE,
    SIGNED_ZERO,
)
from generators.registry import REGISTRY
from oracles.blame import (
    BLAME_FACTOR,
    UNSTABLE_FACTOR,
    BlameResult,
    blame_all,
    blame_output,
    normalised_error,
    round_to_dtype,
    source_unreliable,
)
from oracles.compare import Tolerance
from oracles.discontinuity import LABELS, labels_for, output_labels

F32, F64 = np.float32, np.float64
REF = np.array([1.0, 2.0, -3.0], F64)
F32_TOL = Tolerance(rtol=1e-4, atol=1e-6)


def _f32(scale: float) -> np.ndarray:
    """The reference times (1 + scale), stored as float32."""
    return (REF * (1.0 + scale)).astype(F32)


# (id, source, target, dtype, blamed, reason)
CASES = [
    ("target-far-source-exact", REF.astype(F32), _f32(1e-3), "float32", True, "target-diverges"),
    ("target-nan", REF.astype(F32), np.array([1.0, np.nan, -3.0], F32), "float32", True, "target-diverges"),
    ("both-exact", REF.astype(F32), REF.astype(F32), "float32", False, "within-tolerance"),
    ("target-within-tol", REF.astype(F32), _f32(5e-5), "float32", False, "within-tolerance"),
    ("both-equally-far", _f32(1e-3), _f32(1e-3), "float32", False, "unstable-source"),
    ("source-far-target-exact", _f32(1e-3), REF.astype(F32), "float32", False, "unstable-source"),
    ("comparable-error", _f32(5e-5), _f32(3e-4), "float32", False, "comparable-error"),
    # An unstable source (10 units off) excuses a target up to UNSTABLE_FACTOR (10) times further, not beyond.
    ("unstable-source-excuses-its-size", _f32(1e-3), _f32(5e-3), "float32", False, "unstable-source"),
    ("beyond-an-unstable-source", _f32(1e-3), _f32(2e-2), "float32", True, "diverges-beyond-unstable-source"),
    ("far-beyond-an-unstable-source", _f32(1e-3), _f32(2.0), "float32", True, "diverges-beyond-unstable-source"),
    ("int-target-wrong", np.array([1, 2, -3], np.int64), np.array([1, 2, -4], np.int64), "int64", True,
     "target-diverges"),
    ("int-source-wrong", np.array([1, 3, -3], np.int64), np.array([1, 3, -3], np.int64), "int64", False,
     "unstable-source"),
    ("bool-equal", np.array([True, True, True]), np.array([True, True, True]), "bool", False, "within-tolerance"),
    ("target-shape", REF.astype(F32), np.zeros(2, F32), "float32", True, "shape"),
]


@pytest.mark.parametrize("source, target, dtype, blamed, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_blame_table(source: np.ndarray, target: np.ndarray, dtype: str, blamed: bool, reason: str) -> None:
    reference = REF.astype(bool) if dtype == "bool" else REF
    result = blame_output(source, target, reference, dtype)
    assert (result.blamed, result.reason) == (blamed, reason)
    assert result.unstable_source == (reason == "unstable-source")


def test_blame_errors_in_tolerance_units() -> None:
    # float32 tolerance at |ref| = 2: 1e-6 + 1e-4 * 2 = 2.01e-4; a target off by 2.01e-3 is 10 units away.
    reference = np.array([2.0], F64)
    result = blame_output(np.array([2.0], F32), np.array([2.00201], F32), reference, "float32")
    assert result.blamed and result.source_error == 0.0
    assert result.target_error == pytest.approx(10.0, rel=1e-3)
    assert result.ratio == pytest.approx(10.0 / 0.1, rel=1e-3)  # source error floored at 1/K


def test_ratio_must_exceed_factor() -> None:
    reference = np.array([1.0], F64)
    source = np.array([1.0 + 0.5 * 1.01e-4], F64)  # half a tolerance unit
    near = blame_output(source, np.array([1.0 + 4.0 * 1.01e-4], F64), reference, "float64", tol=F32_TOL)
    far = blame_output(source, np.array([1.0 + 6.0 * 1.01e-4], F64), reference, "float64", tol=F32_TOL)
    assert (near.blamed, near.reason) == (False, "comparable-error")  # 8x the source's error: not enough
    assert (far.blamed, far.reason) == (True, "target-diverges")  # 12x
    assert BLAME_FACTOR == 10.0


def test_reference_is_rounded_to_low_precision_first() -> None:
    assert round_to_dtype(np.array([1.00390625, 1.005, 3.4e38, -2.0]), "bfloat16").tolist() == [
        1.0, 1.0078125, math.inf, -2.0,
    ]
    assert np.isnan(round_to_dtype(np.array([np.nan]), "bfloat16")).all()
    assert round_to_dtype(np.array([1000.3]), "float16").tolist() == [1000.5]
    # float32 overflow: the float64 answer rounds to inf, so an inf source and target are both exact.
    reference = np.array([1e39], F64)
    inf = np.array([np.inf], F32)
    assert blame_output(inf, inf, reference, "float32") == BlameResult(False, 0.0, 0.0, 0.0, "within-tolerance")


def test_an_unstable_integer_source_excuses_as_many_wrong_elements_times_the_factor() -> None:
    reference = np.zeros(40, F64)
    source = np.zeros(40, np.int64)
    source[0] = 1  # one element off: a near tie the float32 source broke the other way
    few, many = np.zeros(40, np.int64), np.zeros(40, np.int64)
    few[:5], many[:11] = 1, 1
    assert blame_output(source, few, reference, "int64").reason == "unstable-source"
    assert blame_output(source, many, reference, "int64").reason == "diverges-beyond-unstable-source"
    assert UNSTABLE_FACTOR == BLAME_FACTOR


def test_a_float64_target_through_a_float32_attribute_is_judged_against_the_rounded_reference() -> None:
    """The reference computed with an attribute rounded to float32 (as ONNX stores it) excuses a float64 target
    that matches it, and only that: a target off both references is blamed by its distance to the nearer."""
    reference = np.array([1.0, 2.0], F64)
    rounded = reference * (1 + 2.5e-8)  # what eps=float32(1e-5) makes of a small-variance layer_norm
    as_rounded = blame_output(reference, rounded.copy(), reference, "float64", rounded=rounded)
    assert (as_rounded.blamed, as_rounded.reason) == (False, "float32-attribute")
    assert blame_output(reference, rounded.copy(), reference, "float64").blamed  # 25 units without it
    wrong = blame_output(reference, reference * (1 + 1e-6), reference, "float64", rounded=rounded)
    assert (wrong.blamed, wrong.reason) == (True, "target-diverges")
    assert wrong.target_error == pytest.approx(normalised_error(reference * (1 + 1e-6), rounded, "float64"))


def test_source_unreliable() -> None:
    assert source_unreliable(_f32(1e-3), REF, "float32")
    assert not source_unreliable(REF.astype(F32), REF, "float32")
    assert source_unreliable(np.array([0, 1]), np.array([0.0, 2.0]), "int32")
    assert normalised_error(np.array([np.inf]), np.array([-np.inf]), "float64") == math.inf


def test_blame_all_and_shape_errors() -> None:
    results = blame_all([REF.astype(F32)], [_f32(1e-3)], [REF], ["float32"])
    assert [r.blamed for r in results] == [True]
    with pytest.raises(ValueError):
        blame_all([REF.astype(F32)], [], [REF], ["float32"])
    with pytest.raises(ValueError, match="source shape"):
        blame_output(np.zeros(2, F32), np.zeros(3, F32), np.zeros(3, F64), "float32")


# --- discontinuity labels: inputs on which a divergence may be the input's fault, not the converter's ---

# (op, inputs, attrs, labels): one row per label, plus ordinary inputs that get none.
LABEL_CASES = [
    ("round", [[2.5, 0.1]], {}, {ROUNDING_TIE}),
    ("round", [[0.125]], {"decimals": 2}, {ROUNDING_TIE}),
    ("floor", [[3.0000001]], {}, {ROUNDING_TIE}),
    ("remainder", [[6.0], [1.5]], {}, {ROUNDING_TIE}),
    ("cast_int64", [[7.0]], {"to": "int64"}, {ROUNDING_TIE}),
    ("cast_uint8", [[300.5]], {"to": "uint8"}, {CAST_OUT_OF_RANGE}),
    ("argmax", [[[1.0, 4.0, 4.0], [0.0, 1.0, 2.0]]], {"dim": 1}, {EQUAL_IN_ARGMAX}),
    ("topk", [[5.0, 3.0, 3.0]], {"k": 1, "largest": False}, {EQUAL_IN_ARGMAX}),
    ("topk", [[3.0, 5.0, 5.0]], {"k": 1, "largest": False}, set()),
    ("topk", [[5.0, 3.0, 3.0]], {"k": 1}, set()),
    ("topk", [[5.0, 5.0, 3.0]], {"k": 1}, {EQUAL_IN_ARGMAX}),
    ("atan2", [[0.0, 1.0], [-2.0, -2.0]], {}, {BRANCH_CUT}),
    ("pow", [[-8.0], [0.3333]], {}, {BRANCH_CUT}),
    ("log", [[-0.0]], {}, {BRANCH_CUT, SIGNED_ZERO}),
    ("acos", [[-1.0]], {}, {BRANCH_CUT}),
    ("div", [[1.0], [-0.0]], {}, {BRANCH_CUT, SIGNED_ZERO}),
    ("eq", [[0.1], [0.1]], {}, {COMPARISON_TIE}),
    ("ge", [[1.0], [1.0 + 1e-7]], {}, {COMPARISON_TIE}),
    ("relu", [[0.0, -1.0]], {}, {COMPARISON_TIE}),
    ("clamp", [[-1.0, 3.0]], {"min": -1.0}, {COMPARISON_TIE}),
    ("threshold", [[0.5]], {"threshold": 0.5, "value": 0.0}, {COMPARISON_TIE}),
    ("cast_bool", [[0.0, 2.0]], {"to": "bool"}, {COMPARISON_TIE}),
    ("max_pool2d", [np.array([[[[1.0, 1.0], [0.0, 0.5]]]], np.float32)], {"return_indices": True}, {EQUAL_IN_ARGMAX}),
    # Ordinary inputs, continuous ops and integer inputs get no label.
    ("round", [[2.4, -0.6]], {}, set()),
    ("floor", [[1.3, -2.7]], {}, set()),
    ("floor", [np.array([1, 2], np.int64)], {}, set()),
    ("cast_int32", [[2.3]], {"to": "int32"}, set()),
    ("cast_float16", [[2.0]], {"to": "float16"}, set()),
    ("argmax", [[1.0, 3.0, 2.0]], {}, set()),
    ("argmax", [np.array([3, 1, 2], np.int64)], {}, set()),
    ("atan2", [[1.0], [-1.0]], {}, set()),
    ("log", [[2.0]], {}, set()),
    ("lt", [[1.0], [2.0]], {}, set()),
    ("lt", [np.array([1, 2]), np.array([1, 3])], {}, set()),
    ("relu", [[1.0, -1.0]], {}, set()),
    ("amax", [[4.0, 4.0]], {"dim": 0}, set()),
    ("max_pool2d", [np.ones((1, 1, 2, 2), np.float32)], {}, set()),
    ("max", [[4.0, 4.0]], {}, set()),
    ("gelu", [[0.0]], {}, set()),
]


LABEL_IDS = [f"{case[0]}-{i}" for i, case in enumerate(LABEL_CASES)]


@pytest.mark.parametrize("op, inputs, attrs, labels", LABEL_CASES, ids=LABEL_IDS)
def test_labels_for(op: str, inputs: list, attrs: dict, labels: set[str]) -> None:
    arrays = [x if isinstance(x, np.ndarray) else np.asarray(x, np.float32) for x in inputs]
    assert labels_for(REGISTRY[op], arrays, attrs) == labels


@pytest.mark.parametrize("op", sorted(n for n, op in REGISTRY.items() if op.discontinuity is not None))
def test_every_detector_runs_on_any_inputs(op: str) -> None:
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    for inputs in ([x], [x, y], [x, y, z]):
        assert labels_for(REGISTRY[op], inputs, {}) <= LABELS
    assert labels_for(REGISTRY[op], [np.zeros((0, 3), np.float32)], {}) == set()


def test_output_labels_signed_zero() -> None:
    assert output_labels(np.array([-0.0, 1.0]), np.array([0.0, 1.0])) == {SIGNED_ZERO}
    assert output_labels(np.array([0.0, 1.0]), np.array([0.0, 1.0])) == set()
