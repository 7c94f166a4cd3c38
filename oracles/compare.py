"""Compare one target output with the expected one: exact for ints/bools, per-dtype tolerance for floats.

A comparison returns metrics (how wrong, where, and the tolerance that would have passed), never a bare bool.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np


class Reason(str, enum.Enum):
    """Why a comparison failed (the first failing rule), or "ok"."""

    OK = "ok"
    SHAPE = "shape"
    DTYPE = "dtype"
    NAN = "nan"
    INF = "inf"
    VALUES = "values"


@dataclass(frozen=True)
class Tolerance:
    """Elementwise test |actual - expected| <= atol + rtol * |expected|."""

    rtol: float
    atol: float

    def to_json(self) -> dict[str, Any]:
        return {"rtol": float_to_json(self.rtol), "atol": float_to_json(self.atol)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tolerance:
        return cls(float_from_json(data["rtol"]), float_from_json(data["atol"]))


EXACT = Tolerance(rtol=0.0, atol=0.0)

# The numpy array type that stores each IR dtype; the caller stores bfloat16 as float32.
STORAGE: Mapping[str, np.dtype] = MappingProxyType(
    {
        name: np.dtype("float32" if name == "bfloat16" else name)
        for name in ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool")
    }
)
FLOAT_DTYPES: frozenset[str] = frozenset({"float32", "float64", "float16", "bfloat16"})

# Why these numbers: converters reorder reductions, fuse ops and use other transcendental kernels, so a few
# chained ops differ by hundreds of ulp in rtol; atol absorbs cancellation near zero, where relative error is
# meaningless. The float64 blame step (oracles.blame) decides whose error a failure is, so these stay moderate.
DEFAULT_TOLERANCES: Mapping[str, Tolerance] = MappingProxyType(
    {
        # eps 2.2e-16: rtol ~4.5e6 ulp still catches any real bug; atol covers cancellation in long sums.
        "float64": Tolerance(rtol=1e-9, atol=1e-12),
        # eps 1.2e-7: rtol 1e-4 ~ 840 ulp; atol 1e-6 ~ 8 eps at unit scale, so a 5e-7 slip on 1e-6 passes.
        "float32": Tolerance(rtol=1e-4, atol=1e-6),
        # eps 9.8e-4 (10 mantissa bits): ~5 ulp, since a target may keep fp16 intermediates where eager upcasts.
        "float16": Tolerance(rtol=5e-3, atol=1e-3),
        # eps 7.8e-3 (8 significant bits): ~2 ulp relative, ~1 ulp absolute at unit scale.
        "bfloat16": Tolerance(rtol=1.6e-2, atol=1e-2),
        **{name: EXACT for name in ("int32", "int64", "int8", "uint8", "bool")},
    }
)


def default_tolerance(dtype: str) -> Tolerance:
    """The default tolerance for an IR dtype name; ValueError names an unknown one."""
    if dtype not in DEFAULT_TOLERANCES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {sorted(DEFAULT_TOLERANCES)}")
    return DEFAULT_TOLERANCES[dtype]


def float_to_json(x: float) -> float | str:
    """Plain JSON has no NaN/Inf: those become the strings "nan", "inf", "-inf"."""
    return float(x) if math.isfinite(x) else str(float(x))


def float_from_json(x: float | str) -> float:
    return float(x)


@dataclass(frozen=True)
class OutputComparison:
    """Metrics of one output comparison.

    `needed.atol` is the smallest atol that passes at the given rtol, `needed.rtol` the smallest rtol that
    passes at the given atol (each alone, paired with the given other one); inf where no tolerance can pass.
    """

    ok: bool
    reason: Reason
    dtype: str
    actual_shape: tuple[int, ...]
    expected_shape: tuple[int, ...]
    actual_dtype: str
    expected_dtype: str
    max_abs: float
    max_rel: float
    n_bad: int
    n_total: int
    first_bad_index: tuple[int, ...] | None
    tolerance: Tolerance
    needed: Tolerance

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason.value,
            "dtype": self.dtype,
            "actual_shape": list(self.actual_shape),
            "expected_shape": list(self.expected_shape),
            "actual_dtype": self.actual_dtype,
            "expected_dtype": self.expected_dtype,
            "max_abs": float_to_json(self.max_abs),
            "max_rel": float_to_json(self.max_rel),
            "n_bad": self.n_bad,
            "n_total": self.n_total,
            "first_bad_index": None if self.first_bad_index is None else list(self.first_bad_index),
            "tolerance": self.tolerance.to_json(),
            "needed": self.needed.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutputComparison:
        first = data["first_bad_index"]
        return cls(
            ok=bool(data["ok"]),
            reason=Reason(data["reason"]),
            dtype=data["dtype"],
            actual_shape=tuple(int(d) for d in data["actual_shape"]),
            expected_shape=tuple(int(d) for d in data["expected_shape"]),
            actual_dtype=data["actual_dtype"],
            expected_dtype=data["expected_dtype"],
            max_abs=float_from_json(data["max_abs"]),
            max_rel=float_from_json(data["max_rel"]),
            n_bad=int(data["n_bad"]),
            n_total=int(data["n_total"]),
            first_bad_index=None if first is None else tuple(int(i) for i in first),
            tolerance=Tolerance.from_json(data["tolerance"]),
            needed=Tolerance.from_json(data["needed"]),
        )


def compare(actual: np.ndarray, expected: np.ndarray, dtype: str, tol: Tolerance | None = None) -> OutputComparison:
    """Compare `actual` (target) with `expected` (source) for an output whose IR dtype is `dtype`."""
    storage = STORAGE.get(dtype)
    if storage is None:
        raise ValueError(f"unknown dtype {dtype!r}; known: {sorted(STORAGE)}")
    if expected.dtype != storage:
        # The source disagrees with its own graph: a convsmith bug, not a converter bug.
        raise ValueError(f"expected array is {expected.dtype} but the IR says {dtype} (stored as {storage})")
    tol = default_tolerance(dtype) if tol is None else tol
    if actual.shape != expected.shape:
        return _mismatch(Reason.SHAPE, actual, expected, dtype, tol)
    if actual.dtype != storage:
        return _mismatch(Reason.DTYPE, actual, expected, dtype, tol)
    floats = dtype in FLOAT_DTYPES
    if np.array_equal(actual, expected, equal_nan=floats):
        # Most outputs of a passing test are bit for bit the source's (82% at 5 nodes): the metrics the full
        # comparison would compute are all zero, without its twenty array passes.
        return _identical(actual, expected, dtype, tol if floats else EXACT)
    if floats:
        return _compare_floats(actual, expected, dtype, tol)
    return _compare_exact(actual, expected, dtype)


def compare_all(
    actuals: Sequence[np.ndarray],
    expecteds: Sequence[np.ndarray],
    dtypes: Sequence[str],
    tols: Sequence[Tolerance | None] | None = None,
) -> tuple[OutputComparison, ...]:
    """Compare outputs pairwise; the three sequences must have one entry per graph output."""
    if not len(actuals) == len(expecteds) == len(dtypes):
        raise ValueError(f"{len(actuals)} actual, {len(expecteds)} expected and {len(dtypes)} dtypes differ")
    tols = [None] * len(dtypes) if tols is None else tols
    return tuple(compare(a, e, d, t) for a, e, d, t in zip(actuals, expecteds, dtypes, tols, strict=True))


def signed_zero_mismatch(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Boolean mask of positions where both values are zero but their signs differ (-0.0 vs +0.0)."""
    both_zero = (actual == 0) & (expected == 0)
    return both_zero & (np.signbit(actual) != np.signbit(expected))


def has_signed_zero_mismatch(actual: np.ndarray, expected: np.ndarray) -> bool:
    """True when some position holds -0.0 on one side and +0.0 on the other (a label, not a failure)."""
    if actual.shape != expected.shape or actual.dtype.kind != "f" or expected.dtype.kind != "f":
        return False
    return bool(signed_zero_mismatch(actual, expected).any())


def _mismatch(reason: Reason, actual: np.ndarray, expected: np.ndarray, dtype: str, tol: Tolerance) -> OutputComparison:
    """A shape or dtype failure: no elementwise metrics exist, so every element counts as bad."""
    inf = math.inf
    return OutputComparison(
        False,
        reason,
        dtype,
        tuple(actual.shape),
        tuple(expected.shape),
        str(actual.dtype),
        str(expected.dtype),
        inf,
        inf,
        int(expected.size),
        int(expected.size),
        None,
        tol,
        Tolerance(inf, inf),
    )


def _identical(actual: np.ndarray, expected: np.ndarray, dtype: str, tol: Tolerance) -> OutputComparison:
    """Equal arrays (NaN where NaN, the same infinities; -0.0 equals 0.0): nothing off, nothing needed."""
    return OutputComparison(True, Reason.OK, dtype, tuple(actual.shape), tuple(expected.shape), str(actual.dtype),
                            str(expected.dtype), 0.0, 0.0, 0, int(expected.size), None, tol, Tolerance(0.0, 0.0))


def _compare_exact(actual: np.ndarray, expected: np.ndarray, dtype: str) -> OutputComparison:
    """Integers and bools: equal or wrong; metrics in float64 from an exact unsigned difference."""
    bad = actual != expected
    a, e = actual.astype(np.uint64), expected.astype(np.uint64)
    # Modular uint64 subtraction is the true |a - e| when taken larger-minus-smaller (no int64 overflow).
    diff = np.where(actual >= expected, a - e, e - a).astype(np.float64)
    return _build(actual, expected, dtype, EXACT, bad, diff, np.abs(expected.astype(np.float64)), Reason.VALUES)


def mismatch_mask(actual: np.ndarray, expected: np.ndarray, dtype: str, tol: Tolerance | None = None) -> np.ndarray:
    """Where `actual` fails against `expected` (of one shape) by compare's rules: the elements it counts bad."""
    if dtype not in FLOAT_DTYPES:
        return np.asarray(actual != expected)
    checks = _float_checks(actual, expected, default_tolerance(dtype) if tol is None else tol)
    return checks.nan_bad | checks.inf_bad | checks.value_bad


@dataclass(frozen=True)
class _FloatChecks:
    """compare's elementwise float rules: NaN and Inf positions that disagree, finite values beyond tolerance."""

    nan_bad: np.ndarray
    inf_bad: np.ndarray
    value_bad: np.ndarray
    diff: np.ndarray
    mag: np.ndarray


def _float_checks(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> _FloatChecks:
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    inf_a, inf_e = np.isinf(a), np.isinf(e)
    nan_bad = nan_a != nan_e
    inf_bad = ~nan_bad & ~(nan_a & nan_e) & (inf_a | inf_e) & (a != e)
    finite = np.isfinite(a) & np.isfinite(e)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are inf: masked out below
        diff = np.where(finite, np.abs(a - e), 0.0)
    mag = np.where(finite, np.abs(e), 0.0)
    return _FloatChecks(nan_bad, inf_bad, finite & (diff > tol.atol + tol.rtol * mag), diff, mag)


def _compare_floats(actual: np.ndarray, expected: np.ndarray, dtype: str, tol: Tolerance) -> OutputComparison:
    """NaN positions must agree, then Inf positions and signs, then finite values within tolerance."""
    c = _float_checks(actual, expected, tol)
    reason = Reason.NAN if c.nan_bad.any() else Reason.INF if c.inf_bad.any() else Reason.VALUES
    nonfinite_bad = c.nan_bad | c.inf_bad
    return _build(actual, expected, dtype, tol, nonfinite_bad | c.value_bad, c.diff, c.mag, reason,
                  nonfinite_bad.any())


def _build(
    actual: np.ndarray,
    expected: np.ndarray,
    dtype: str,
    tol: Tolerance,
    bad: np.ndarray,
    diff: np.ndarray,
    mag: np.ndarray,
    fail_reason: Reason,
    hopeless: bool = False,
) -> OutputComparison:
    """Assemble metrics; `hopeless` means a NaN/Inf mismatch: infinitely wrong, no tolerance fixes it."""
    n_bad = int(bad.sum())
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)) if n_bad else None
    needed = Tolerance(math.inf, math.inf) if hopeless else _needed(diff, mag, tol)
    return OutputComparison(
        ok=n_bad == 0,
        reason=Reason.OK if n_bad == 0 else fail_reason,
        dtype=dtype,
        actual_shape=tuple(actual.shape),
        expected_shape=tuple(expected.shape),
        actual_dtype=str(actual.dtype),
        expected_dtype=str(expected.dtype),
        max_abs=math.inf if hopeless else float(diff.max()) if diff.size else 0.0,
        max_rel=math.inf if hopeless else _max_rel(diff, mag),
        n_bad=n_bad,
        n_total=int(expected.size),
        first_bad_index=first,
        tolerance=tol,
        needed=needed,
    )


def _max_rel(diff: np.ndarray, mag: np.ndarray) -> float:
    """max |a-e|/|e|, with 0/0 = 0 and x/0 = inf."""
    if not diff.size:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / mag)
    return float(rel.max())


def _needed(diff: np.ndarray, mag: np.ndarray, tol: Tolerance) -> Tolerance:
    """Smallest atol at the given rtol, and smallest rtol at the given atol (inf if |e| = 0 needs rtol)."""
    if not diff.size:
        return Tolerance(0.0, 0.0)
    atol = float(np.maximum(diff - tol.rtol * mag, 0.0).max())
    excess = np.maximum(diff - tol.atol, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(excess == 0, 0.0, excess / mag)
    return Tolerance(rtol=float(rel.max()), atol=atol)
