"""Tests for oracles.compare: exactness rules, NaN/Inf placement, per-dtype tolerances, metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from oracles.compare import (  # _compare_exact and _compare_floats: the full comparisons the shortcut must match
    DEFAULT_TOLERANCES,
    FLOAT_DTYPES,
    OutputComparison,
    Reason,
    Tolerance,
    _compare_exact,
    _compare_floats,
    compare,
    compare_all,
    default_tolerance,
    has_signed_zero_mismatch,
    signed_zero_mismatch,
)

NAN, INF = math.nan, math.inf
F32, F64, F16 = np.float32, np.float64, np.float16

# (id, actual, expected, IR dtype, ok, reason, n_bad, first_bad_index)
CASES = [
    ("int-equal", np.array([1, 2, 3], np.int64), np.array([1, 2, 3], np.int64), "int64", True, "ok", 0, None),
    ("int-off-by-one", np.array([1, 2, 4], np.int32), np.array([1, 2, 3], np.int32), "int32", False, "values", 1, (2,)),
    ("uint8-off-by-one", np.array([0, 255], np.uint8), np.array([1, 255], np.uint8), "uint8", False, "values", 1, (0,)),
    ("bool-equal", np.array([True, False]), np.array([True, False]), "bool", True, "ok", 0, None),
    ("bool-flip", np.array([[True, True]]), np.array([[True, False]]), "bool", False, "values", 1, (0, 1)),
    ("nan-same-place", np.array([NAN, 1.0], F32), np.array([NAN, 1.0], F32), "float32", True, "ok", 0, None),
    ("nan-other-place", np.array([1.0, NAN], F32), np.array([NAN, 1.0], F32), "float32", False, "nan", 2, (0,)),
    ("nan-vs-number", np.array([NAN], F64), np.array([0.0], F64), "float64", False, "nan", 1, (0,)),
    ("inf-same", np.array([INF, -INF], F32), np.array([INF, -INF], F32), "float32", True, "ok", 0, None),
    ("inf-sign", np.array([INF, 1.0], F32), np.array([-INF, 1.0], F32), "float32", False, "inf", 1, (0,)),
    ("inf-vs-big", np.array([1.0, INF], F32), np.array([1.0, 3e38], F32), "float32", False, "inf", 1, (1,)),
    ("signed-zero", np.array([-0.0, 0.0], F32), np.array([0.0, -0.0], F32), "float32", True, "ok", 0, None),
    ("near-zero-rel", np.array([1.5e-6], F32), np.array([1e-6], F32), "float32", True, "ok", 0, None),
    ("f32-values", np.array([1.0, 1.001], F32), np.array([1.0, 1.0], F32), "float32", False, "values", 1, (1,)),
    ("shape", np.zeros((2, 3), F32), np.zeros((3, 2), F32), "float32", False, "shape", 6, None),
    ("rank", np.zeros((6,), F32), np.zeros((1, 6), F32), "float32", False, "shape", 6, None),
    ("dtype", np.zeros(3, F64), np.zeros(3, F32), "float32", False, "dtype", 3, None),
    ("int-width", np.zeros(3, np.int32), np.zeros(3, np.int64), "int64", False, "dtype", 3, None),
    ("f16-ok", np.array([1.004], F16), np.array([1.0], F16), "float16", True, "ok", 0, None),
    ("f16-bad", np.array([1.03], F16), np.array([1.0], F16), "float16", False, "values", 1, (0,)),
    ("bf16-ok", np.array([1.0234375], F32), np.array([1.0], F32), "bfloat16", True, "ok", 0, None),
    ("bf16-as-f32", np.array([1.0234375], F32), np.array([1.0], F32), "float32", False, "values", 1, (0,)),
    ("bf16-bad", np.array([1.0625], F32), np.array([1.0], F32), "bfloat16", False, "values", 1, (0,)),
    ("empty", np.zeros((0, 3), F32), np.zeros((0, 3), F32), "float32", True, "ok", 0, None),
    ("scalar", np.array(2.0, F64), np.array(3.0, F64), "float64", False, "values", 1, ()),
]


@pytest.mark.parametrize("actual, expected, dtype, ok, reason, n_bad, first", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_compare_table(actual, expected, dtype, ok, reason, n_bad, first) -> None:
    result = compare(actual, expected, dtype)
    assert (result.ok, result.reason.value, result.n_bad, result.first_bad_index) == (ok, reason, n_bad, first)
    assert result.n_total == expected.size


def test_near_zero_relative_error_passes_float32() -> None:
    """From the issue: |diff| 5e-7 on values near 1e-6 must pass (relative error 50%, absolute tiny)."""
    expected = np.array([1e-6, -1.2e-6, 0.8e-6], F32)
    assert compare(expected + F32(5e-7), expected, "float32").ok


def test_needed_tolerance_exact_values() -> None:
    tol = Tolerance(rtol=0.1, atol=0.5)
    result = compare(np.array([1.0, 12.0, 0.0], F64), np.array([1.0, 10.0, 0.0], F64), "float64", tol)
    # |diff| = 2 at |e| = 10: atol needed at rtol 0.1 is 2 - 1 = 1; rtol needed at atol 0.5 is 1.5 / 10.
    assert result.needed == Tolerance(rtol=0.15, atol=1.0)
    assert (result.max_abs, result.max_rel, result.ok) == (2.0, 0.2, False)


def test_needed_is_infinite_where_only_atol_helps() -> None:
    result = compare(np.array([0.25], F64), np.array([0.0], F64), "float64", Tolerance(rtol=0.0, atol=0.0))
    assert result.needed == Tolerance(rtol=INF, atol=0.25)
    assert result.max_rel == INF


def test_needed_is_zero_when_equal_and_passes_when_applied() -> None:
    assert compare(np.ones(3, F32), np.ones(3, F32), "float32").needed == Tolerance(0.0, 0.0)
    a, e = np.array([1.0, 2.5, -3.0], F64), np.array([1.1, 2.0, -3.0], F64)
    needed = compare(a, e, "float64").needed
    assert compare(a, e, "float64", Tolerance(rtol=1e-9, atol=needed.atol)).ok
    assert compare(a, e, "float64", Tolerance(rtol=needed.rtol, atol=1e-12)).ok


def test_nonfinite_mismatch_is_infinitely_wrong() -> None:
    result = compare(np.array([NAN], F32), np.array([1.0], F32), "float32")
    assert (result.max_abs, result.needed) == (INF, Tolerance(INF, INF))


def test_signed_zero_helper_detects_what_compare_accepts() -> None:
    actual, expected = np.array([-0.0, 0.0, -0.0, 1.0], F32), np.array([0.0, 0.0, -0.0, 1.0], F32)
    assert compare(actual, expected, "float32").ok
    assert signed_zero_mismatch(actual, expected).tolist() == [True, False, False, False]
    assert has_signed_zero_mismatch(actual, expected)
    assert not has_signed_zero_mismatch(expected, expected)
    assert not has_signed_zero_mismatch(np.array([0], np.int32), np.array([0], np.int32))


def test_bfloat16_error_fails_float32_and_float16() -> None:
    e = np.array([4.0], F32)
    a = np.array([4.0625], F32)  # one bfloat16 ulp at 4: fine for bfloat16, far too much for float32
    assert compare(a, e, "bfloat16").ok
    assert not compare(a, e, "float32").ok
    assert not compare(a.astype(F16), e.astype(F16), "float16").ok


def test_tolerance_ordering_by_precision() -> None:
    order = ["float64", "float32", "float16", "bfloat16"]
    rtols = [DEFAULT_TOLERANCES[d].rtol for d in order]
    assert rtols == sorted(rtols) and len(set(rtols)) == 4
    assert DEFAULT_TOLERANCES["bfloat16"] == Tolerance(rtol=1.6e-2, atol=1e-2)
    assert all(DEFAULT_TOLERANCES[d] == Tolerance(0.0, 0.0) for d in ("int32", "int64", "int8", "uint8", "bool"))


def test_unknown_dtype_and_inconsistent_expected_raise() -> None:
    with pytest.raises(ValueError, match="unknown dtype"):
        default_tolerance("float8")
    with pytest.raises(ValueError, match="unknown dtype"):
        compare(np.zeros(1, F32), np.zeros(1, F32), "complex64")
    with pytest.raises(ValueError, match="IR says float32"):
        compare(np.zeros(1, F32), np.zeros(1, F64), "float32")


def test_compare_all_pairs_outputs_and_checks_lengths() -> None:
    results = compare_all([np.ones(2, F32), np.array([1], np.int64)], [np.ones(2, F32), np.array([2], np.int64)],
                          ["float32", "int64"])
    assert [r.ok for r in results] == [True, False]
    with pytest.raises(ValueError):
        compare_all([np.ones(2, F32)], [], ["float32"])


def test_comparison_json_round_trip_is_plain_json() -> None:
    result = compare(np.array([NAN, 2.0, INF], F32), np.array([1.0, 2.0, INF], F32), "float32")
    text = json.dumps(result.to_json(), allow_nan=False)
    assert OutputComparison.from_json(json.loads(text)) == result
    assert result.reason is Reason.NAN


_FLOAT_DTYPES = st.sampled_from([(F32, "float32"), (F64, "float64"), (F16, "float16"), (F32, "bfloat16")])


@given(data=st.data(), kind=_FLOAT_DTYPES)
def test_array_equals_itself(data: st.DataObject, kind: tuple[type, str]) -> None:
    np_dtype, name = kind
    x = data.draw(hnp.arrays(np_dtype, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
    result = compare(x.copy(), x, name)
    assert result.ok and result.n_bad == 0 and result.max_abs == 0.0


_ALL_DTYPES = st.sampled_from([(F32, "float32"), (F64, "float64"), (F16, "float16"), (F32, "bfloat16"),
                                (np.int64, "int64"), (np.int32, "int32"), (np.int8, "int8"), (np.uint8, "uint8"),
                                (np.bool_, "bool")])


@given(data=st.data(), kind=_ALL_DTYPES)
def test_equal_arrays_take_a_shortcut_with_the_full_comparisons_metrics(data: st.DataObject,
                                                                        kind: tuple[type, str]) -> None:
    """compare() returns equal arrays' metrics without computing them: exactly what the full comparison gives (NaN
    and infinities in place, -0.0 against 0.0 included)."""
    np_dtype, name = kind
    x = data.draw(hnp.arrays(np_dtype, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
    same = np.where(x == 0, -x, x) if x.dtype.kind == "f" else x.copy()  # signed zeros flipped
    full = (_compare_floats(same, x, name, default_tolerance(name)) if name in FLOAT_DTYPES
            else _compare_exact(same, x, name))
    assert compare(same, x, name) == full and full.ok


@given(
    a=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
    b=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
)
def test_shape_check_is_symmetric(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    forward = compare(np.zeros(a, F32), np.zeros(b, F32), "float32")
    backward = compare(np.zeros(b, F32), np.zeros(a, F32), "float32")
    assert forward.ok == backward.ok == (a == b)
    assert forward.reason == backward.reason


@given(x=hnp.arrays(np.int64, hnp.array_shapes(max_dims=2, max_side=5)), i=st.integers(0, 24))
def test_integers_are_exact(x: np.ndarray, i: int) -> None:
    y = x.copy()
    y.flat[i % y.size] ^= 1  # flip the lowest bit of one element: always off by one
    result = compare(y, x, "int64")
    assert not result.ok and result.n_bad == 1 and result.max_abs == 1.0
