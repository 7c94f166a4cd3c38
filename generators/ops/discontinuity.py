"""The kinds of discontinuity an operator can have, as detectors an op class names in its `discontinuity`.

A detector reads an op's concrete (numpy) inputs and attributes and returns labels: the inputs sit where a tiny
upstream difference flips the output. A label is information for triage, not a verdict. Continuous ops whose
value ignores ties (amax, amin, max_pool without indices) name no detector on purpose: a wrong value there is a
real bug, and a label would invite dismissing it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

ROUNDING_TIE = "rounding_tie"
EQUAL_IN_ARGMAX = "equal_in_argmax"
BRANCH_CUT = "branch_cut"
SIGNED_ZERO = "signed_zero"
COMPARISON_TIE = "comparison_tie"
CAST_OUT_OF_RANGE = "cast_out_of_range"
LABELS = frozenset({ROUNDING_TIE, EQUAL_IN_ARGMAX, BRANCH_CUT, SIGNED_ZERO, COMPARISON_TIE, CAST_OUT_OF_RANGE})

Labels = frozenset[str]
AttrMap = Mapping[str, Any]


@dataclass(frozen=True)
class Closeness:
    """Floats a, b are "near" when |a - b| <= rel * max(|a|, |b|) + abs; integers only when equal."""

    rel: float = 1e-6  # ~8 float32 ulp: what a reordered computation upstream can move a value
    abs: float = 1e-12

    def near(self, a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
        a, b = np.asarray(a), np.asarray(b)
        if not (_is_float(a) or _is_float(b)):
            return np.asarray(a == b)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            bound = self.rel * np.maximum(np.abs(a64), np.abs(b64)) + self.abs
            return np.asarray(np.abs(a64 - b64) <= bound)


class Detector(Protocol):
    """Labels for one op application: its numpy inputs (data inputs, then weights) and attributes."""

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels: ...


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind == "f"


def _label(label: str, mask: np.ndarray | bool) -> Labels:
    return frozenset({label}) if bool(np.any(mask)) else frozenset()


def _as64(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(x).astype(np.float64) for x in inputs]


# ---- value jumps: rounding, casts, division, branch cuts, sign bits -----------------------------------------

def rounding(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """round: a tie is a fractional part of .5 (half-to-even vs half-away differ)."""
    if not _is_float(inputs[0]):
        return frozenset()
    x = np.abs(inputs[0].astype(np.float64)) * 10.0 ** int(attrs.get("decimals", 0) or 0)
    return _label(ROUNDING_TIE, near.near(x - np.floor(x), 0.5))


def to_integer(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """floor/ceil/trunc/frac: a tie is a value at (or within eps of) an integer."""
    if not _is_float(inputs[0]):
        return frozenset()
    x = inputs[0].astype(np.float64)
    return _label(ROUNDING_TIE, near.near(x, np.rint(x)))


_INT_RANGES = MappingProxyType(
    {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
)


def cast(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """Float to int truncates (ties at integers) and is undefined out of range; float to bool compares with 0.
    The target dtype is the attribute `to`."""
    to = str(attrs.get("to", "")).replace("torch.", "")
    if not _is_float(inputs[0]):
        return frozenset()
    x = inputs[0].astype(np.float64)
    if to == "bool":
        return _label(COMPARISON_TIE, near.near(x, 0.0))
    if to not in _INT_RANGES:
        return frozenset()
    lo, hi = _INT_RANGES[to]
    with np.errstate(invalid="ignore"):
        out_of_range = ~np.isfinite(x) | (x < lo) | (x >= float(hi) + 1.0)
    return _label(ROUNDING_TIE, near.near(x, np.rint(x))) | _label(CAST_OUT_OF_RANGE, out_of_range)


@dataclass(frozen=True)
class Division:
    """a / b: a zero divisor is a branch cut (its sign picks +-inf); integer-valued division (floor_divide,
    remainder, fmod, or a floor/trunc rounding_mode) also ties where a/b is an integer."""

    integer: bool = False

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
        if len(inputs) < 2 or not (_is_float(inputs[0]) or _is_float(inputs[1])):
            return frozenset()
        a, b = np.broadcast_arrays(inputs[0].astype(np.float64), inputs[1].astype(np.float64))
        labels = _label(BRANCH_CUT, b == 0) | _label(SIGNED_ZERO, (b == 0) & np.signbit(b))
        if self.integer or attrs.get("rounding_mode") in ("floor", "trunc"):
            with np.errstate(divide="ignore", invalid="ignore"):
                q = a / b
            labels |= _label(ROUNDING_TIE, np.isfinite(q) & near.near(q, np.rint(q)))
        return labels


def atan2(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """atan2(y, x) jumps from pi to -pi across y = +-0 for x < 0; the sign of a zero y picks the side."""
    if len(inputs) < 2:
        return frozenset()
    y, x = np.broadcast_arrays(*_as64(inputs[:2]))
    cut = (y == 0) & (x <= 0)
    return _label(BRANCH_CUT, cut) | _label(SIGNED_ZERO, cut & np.signbit(y))


def power(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """A negative base is NaN unless the exponent is an exact integer; 0 ** negative is +-inf."""
    exponent = inputs[1] if len(inputs) >= 2 else np.asarray(attrs.get("exponent", 1.0))
    base, exp = np.broadcast_arrays(*_as64([inputs[0], exponent]))
    labels = _label(BRANCH_CUT, (base < 0) | ((base == 0) & (exp <= 0)))
    return labels | _label(SIGNED_ZERO, (base == 0) & np.signbit(base) & (exp < 0))


@dataclass(frozen=True)
class BranchPoints:
    """A one-argument function that jumps or leaves its domain at `points` (exact zeros of either sign, other
    points within eps); `signed_zero`: the sign of a zero input picks the result (1/x, log)."""

    points: tuple[float, ...]
    signed_zero: bool = False

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
        x = inputs[0].astype(np.float64)
        hits = np.zeros(x.shape, dtype=bool)
        for p in self.points:
            hits |= (x == 0) if p == 0 else near.near(x, p)
        signed = (x == 0) & np.signbit(x) if self.signed_zero else False
        return _label(BRANCH_CUT, hits) | _label(SIGNED_ZERO, signed)


def sign_bit(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """copysign/signbit read the sign bit, so a -0.0 input decides the output."""
    sign_source = inputs[-1]
    return _label(SIGNED_ZERO, _is_float(sign_source) and ((sign_source == 0) & np.signbit(sign_source)).any())


# ---- choices between operands or positions: comparisons, thresholds, arg-reductions, pools ------------------

def comparison(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """eq/lt/maximum/...: the two operands are equal or within eps, so the winner can flip."""
    if len(inputs) < 2 and "other" not in attrs:
        return frozenset()
    other = inputs[1] if len(inputs) >= 2 else np.asarray(attrs["other"])
    if not (_is_float(inputs[0]) or _is_float(np.asarray(other))):
        return frozenset()
    a, b = np.broadcast_arrays(inputs[0], np.asarray(other))
    return _label(COMPARISON_TIE, near.near(a, b))


@dataclass(frozen=True)
class Thresholds:
    """An op that switches branch where its input meets a threshold: each is (attribute name or None for a
    fixed point, default value); a name written '-lambd' means the attribute's negation. A threshold with
    neither attribute nor default is read from the next tensor input (clamp's min and max tensors)."""

    bounds: tuple[tuple[str | None, float | None], ...]

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
        if not _is_float(inputs[0]):
            return frozenset()
        x = inputs[0]
        return _label(COMPARISON_TIE, any(np.any(near.near(*np.broadcast_arrays(x, b)))
                                          for b in self.values(inputs, attrs)))

    def values(self, inputs: Sequence[np.ndarray], attrs: AttrMap) -> list[np.ndarray]:
        values: list[np.ndarray] = []
        for i, (name, default) in enumerate(self.bounds):
            key = name.lstrip("-") if name else None
            value = attrs.get(key, default) if key else default
            if value is None and len(inputs) > i + 1:
                value = inputs[i + 1]
            if value is not None:
                negate = name is not None and name.startswith("-")
                values.append(-np.asarray(value, dtype=np.float64) if negate else np.asarray(value))
        return values


def at_zero() -> Thresholds:
    """relu, sign, heaviside and friends: one branch point at 0."""
    return Thresholds(((None, 0.0),))


def _reduction_axis(x: np.ndarray, attrs: AttrMap) -> np.ndarray:
    """The reduced axis moved last (the array flattened when none is given)."""
    axis = attrs.get("dim", attrs.get("axis"))
    if axis is None or x.ndim == 0:
        return x.reshape(-1)
    return np.moveaxis(x, int(axis), -1)


def _sorted_ties(x: np.ndarray, near: Closeness, descending: bool, count: int | None) -> bool:
    """Are two neighbours among the first `count` (all when None) sorted values along the last axis near?"""
    if x.shape[-1] < 2:
        return False
    s = np.sort(x, axis=-1)
    s = s[..., ::-1] if descending else s
    s = s if count is None else s[..., : max(count, 2)]
    return bool(np.any(near.near(s[..., :-1], s[..., 1:])))


@dataclass(frozen=True)
class IndexTie:
    """argmax/argmin/topk/sort: equal (or near) candidates make the returned index or order ambiguous.
    `window` says how many of the sorted values matter (None: all); topk(largest=False) looks at the smallest."""

    descending: bool
    window: Callable[[AttrMap], int | None] = lambda attrs: 2

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
        x = _reduction_axis(inputs[0], attrs)
        down = bool(attrs.get("largest", self.descending))
        return _label(EQUAL_IN_ARGMAX, _sorted_ties(x, near, down, self.window(attrs)))


def top_k_window(attrs: AttrMap) -> int | None:
    """topk: the first k + 1 sorted values decide which k are returned."""
    return int(attrs["k"]) + 1 if "k" in attrs else None


def every_position(attrs: AttrMap) -> None:
    """sort, argsort, kthvalue: every position of the sorted order matters."""
    return None


@dataclass(frozen=True)
class MinMax:
    """max/min: binary (a comparison), with a dim (values and indices: an index tie), or a full reduction
    (continuous)."""

    descending: bool

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
        if len(inputs) >= 2 or "other" in attrs:
            return comparison(inputs, attrs, near)
        if attrs.get("dim", attrs.get("axis")) is not None:
            return IndexTie(self.descending)(inputs, attrs, near)
        return frozenset()


@dataclass(frozen=True)
class PoolIndices:
    """max_pool that returns indices: generous, any two near values in one (N, C) plane may share a window.
    `always`: the op returns indices whatever its attributes say."""

    always: bool = False

    def __call__(self, inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
        if not (self.always or attrs.get("return_indices")):
            return frozenset()
        x = inputs[0]
        planes = x.reshape(x.shape[0] * x.shape[1] if x.ndim >= 3 else 1, -1)
        return _label(EQUAL_IN_ARGMAX, _sorted_ties(planes, near, False, None))

