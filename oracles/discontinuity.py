"""Labels for op inputs that sit on a discontinuity, where a tiny upstream difference flips the output.

A label is information for triage, not a verdict: it says "this divergence may be the input's fault".
Labels: rounding_tie, equal_in_argmax, branch_cut, signed_zero, comparison_tie, cast_out_of_range.
Continuous ops whose value ignores ties (amax, amin, max_pool without indices) get no label on purpose:
a wrong value there is a real bug, and a label would invite dismissing it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from oracles.compare import has_signed_zero_mismatch

ROUNDING_TIE = "rounding_tie"
EQUAL_IN_ARGMAX = "equal_in_argmax"
BRANCH_CUT = "branch_cut"
SIGNED_ZERO = "signed_zero"
COMPARISON_TIE = "comparison_tie"
CAST_OUT_OF_RANGE = "cast_out_of_range"

Labels = frozenset[str]


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


Detector = Callable[[Sequence[np.ndarray], Mapping[str, Any], Closeness], Labels]


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind == "f"


def _label(label: str, mask: np.ndarray | bool) -> Labels:
    return frozenset({label}) if bool(np.any(mask)) else frozenset()


def _floats(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float64) for x in inputs if _is_float(x)]


def _round(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """round/rint: a tie is a fractional part of .5 (half-to-even vs half-away differ)."""
    if not _is_float(inputs[0]):
        return frozenset()
    x = np.abs(inputs[0].astype(np.float64)) * 10.0 ** int(attrs.get("decimals", 0) or 0)
    return _label(ROUNDING_TIE, near.near(x - np.floor(x), 0.5))


def _to_integer(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """floor/ceil/trunc: a tie is a value at (or within eps of) an integer."""
    if not _is_float(inputs[0]):
        return frozenset()
    x = inputs[0].astype(np.float64)
    return _label(ROUNDING_TIE, near.near(x, np.rint(x)))


_INT_RANGES = MappingProxyType(
    {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
)


def _cast(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """Float to int truncates (ties at integers) and is undefined out of range; float to bool compares with 0."""
    to = str(attrs.get("to", attrs.get("dtype", ""))).replace("torch.", "")
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


def _division(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """Integer-valued division (floor_divide, remainder, rounding_mode): ties where a/b is an integer."""
    if len(inputs) < 2 or not (_is_float(inputs[0]) or _is_float(inputs[1])):
        return frozenset()
    a, b = np.broadcast_arrays(inputs[0].astype(np.float64), inputs[1].astype(np.float64))
    labels = _label(BRANCH_CUT, b == 0) | _label(SIGNED_ZERO, (b == 0) & np.signbit(b))
    if attrs.get("rounding_mode") in ("floor", "trunc") or attrs.get("_integer_division"):
        with np.errstate(divide="ignore", invalid="ignore"):
            q = a / b
        labels |= _label(ROUNDING_TIE, np.isfinite(q) & near.near(q, np.rint(q)))
    return labels


def _integer_division(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    return _division(inputs, {**attrs, "_integer_division": True}, near)


def _atan2(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """atan2(y, x) jumps from pi to -pi across y = +-0 for x < 0; the sign of a zero y picks the side."""
    if len(inputs) < 2:
        return frozenset()
    y, x = np.broadcast_arrays(*_as64(inputs[:2]))
    cut = (y == 0) & (x <= 0)
    return _label(BRANCH_CUT, cut) | _label(SIGNED_ZERO, cut & np.signbit(y))


def _pow(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """A negative base is NaN unless the exponent is an exact integer; 0 ** negative is +-inf."""
    base, exp = np.broadcast_arrays(*_as64(_pow_operands(inputs, attrs)))
    labels = _label(BRANCH_CUT, (base < 0) | ((base == 0) & (exp <= 0)))
    return labels | _label(SIGNED_ZERO, (base == 0) & np.signbit(base) & (exp < 0))


def _pow_operands(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    if len(inputs) >= 2:
        return [inputs[0], inputs[1]]
    return [inputs[0], np.asarray(attrs.get("exponent", attrs.get("other", 1.0)))]


def _as64(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(x).astype(np.float64) for x in inputs]


# Branch points of one-argument functions: argument values where the function jumps or leaves its domain.
_BRANCH_POINTS: Mapping[str, tuple[float, ...]] = MappingProxyType(
    {
        "log": (0.0,),
        "log2": (0.0,),
        "log10": (0.0,),
        "sqrt": (0.0,),
        "rsqrt": (0.0,),
        "reciprocal": (0.0,),
        "log1p": (-1.0,),
        "asin": (-1.0, 1.0),
        "acos": (-1.0, 1.0),
        "atanh": (-1.0, 1.0),
        "acosh": (1.0,),
        "logit": (0.0, 1.0),
    }
)
_SIGN_OF_ZERO_MATTERS = frozenset({"rsqrt", "reciprocal", "log", "log2", "log10"})


def _unary_branch(op: str) -> Detector:
    """A detector for `op`'s branch points: exact zeros (either sign), other points within eps."""
    points = _BRANCH_POINTS[op]

    def detect(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
        x = inputs[0].astype(np.float64)
        hits = np.zeros(x.shape, dtype=bool)
        for p in points:
            hits |= (x == 0) if p == 0 else near.near(x, p)
        signed = (x == 0) & np.signbit(x) if op in _SIGN_OF_ZERO_MATTERS else False
        return _label(BRANCH_CUT, hits) | _label(SIGNED_ZERO, signed)

    return detect


def _copysign(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """copysign/signbit read the sign bit, so a -0.0 input decides the output."""
    sign_source = inputs[-1]
    return _label(SIGNED_ZERO, _is_float(sign_source) and ((sign_source == 0) & np.signbit(sign_source)).any())


def _comparison(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """eq/lt/maximum/...: the two operands are equal or within eps, so the winner can flip."""
    if len(inputs) < 2 and "other" not in attrs:
        return frozenset()
    other = inputs[1] if len(inputs) >= 2 else np.asarray(attrs["other"])
    if not (_is_float(inputs[0]) or _is_float(np.asarray(other))):
        return frozenset()
    a, b = np.broadcast_arrays(inputs[0], np.asarray(other))
    return _label(COMPARISON_TIE, near.near(a, b))


# Thresholds of clamp- and relu-like ops: attribute name (or None for a fixed point) and its default.
_THRESHOLDS: Mapping[str, tuple[tuple[str | None, float | None], ...]] = MappingProxyType(
    {
        "relu": ((None, 0.0),),
        "leaky_relu": ((None, 0.0),),
        "prelu": ((None, 0.0),),
        "sign": ((None, 0.0),),
        "heaviside": ((None, 0.0),),
        "relu6": ((None, 0.0), (None, 6.0)),
        "hardtanh": (("min_val", -1.0), ("max_val", 1.0)),
        "hardsigmoid": ((None, -3.0), (None, 3.0)),
        "hardswish": ((None, -3.0), (None, 3.0)),
        "threshold": (("threshold", None),),
        "hardshrink": (("lambd", 0.5), ("-lambd", 0.5)),
        "softshrink": (("lambd", 0.5), ("-lambd", 0.5)),
        "clamp": (("min", None), ("max", None)),
        "clip": (("min", None), ("max", None)),
        "clamp_min": (("min", None),),
        "clamp_max": (("max", None),),
    }
)


def _threshold(op: str) -> Detector:
    """A detector for an op that switches branch at fixed or attribute-given thresholds."""
    spec = _THRESHOLDS[op]

    def detect(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
        if not _is_float(inputs[0]):
            return frozenset()
        bounds = _threshold_values(spec, inputs, attrs)
        x = inputs[0]
        return _label(COMPARISON_TIE, any(np.any(near.near(*np.broadcast_arrays(x, b))) for b in bounds))

    return detect


def _threshold_values(
    spec: tuple[tuple[str | None, float | None], ...], inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]
) -> list[np.ndarray]:
    """Threshold values from the spec: attributes, then extra tensor inputs (clamp's min/max), then defaults."""
    values: list[np.ndarray] = []
    for i, (name, default) in enumerate(spec):
        key = name.lstrip("-") if name else None
        value = attrs.get(key, default) if key else default
        if value is None and len(inputs) > i + 1:
            value = inputs[i + 1]
        if value is not None:
            values.append(-np.asarray(value, dtype=np.float64) if name and name.startswith("-") else np.asarray(value))
    return values


def _reduction_axis(x: np.ndarray, attrs: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Move the reduced axis last (flatten when none is given); return the array and the axis length."""
    axis = attrs.get("dim", attrs.get("axis"))
    if axis is None or x.ndim == 0:
        flat = x.reshape(-1)
        return flat, flat.shape[0]
    moved = np.moveaxis(x, int(axis), -1)
    return moved, moved.shape[-1]


def _sorted_ties(x: np.ndarray, near: Closeness, descending: bool, count: int | None) -> bool:
    """Are two neighbours among the first `count` (all when None) sorted values along the last axis near?"""
    if x.shape[-1] < 2:
        return False
    s = np.sort(x, axis=-1)
    s = s[..., ::-1] if descending else s
    s = s if count is None else s[..., : max(count, 2)]
    return bool(np.any(near.near(s[..., :-1], s[..., 1:])))


def _index_tie(descending: bool, window: Callable[[Mapping[str, Any]], int | None]) -> Detector:
    """argmax/argmin/topk/sort: equal (or near) candidates make the returned index ambiguous."""

    def detect(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
        x, _ = _reduction_axis(inputs[0], attrs)
        down = bool(attrs.get("largest", descending))  # topk(largest=False) looks at the smallest
        return _label(EQUAL_IN_ARGMAX, _sorted_ties(x, near, down, window(attrs)))

    return detect


def _minmax(descending: bool) -> Detector:
    """max/min: binary (comparison), with a dim (values and indices), or a full reduction (continuous)."""
    index_tie = _index_tie(descending, lambda attrs: 2)

    def detect(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
        if len(inputs) >= 2 or "other" in attrs:
            return _comparison(inputs, attrs, near)
        if "dim" in attrs or "axis" in attrs:
            return index_tie(inputs, attrs, near)
        return frozenset()

    return detect


def _pool_with_indices(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    """max_pool with indices: generous, any two near values in one (N, C) plane may share a window."""
    if not (attrs.get("return_indices") or attrs.get("_with_indices")):
        return frozenset()
    x = inputs[0]
    planes = x.reshape(x.shape[0] * x.shape[1] if x.ndim >= 3 else 1, -1)
    return _label(EQUAL_IN_ARGMAX, _sorted_ties(planes, near, False, None))


def _pool_indices_always(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], near: Closeness) -> Labels:
    return _pool_with_indices(inputs, {**attrs, "_with_indices": True}, near)


@dataclass(frozen=True)
class Example:
    """A documented input on which a family's detector must report `label` (run by the tests)."""

    op: str
    inputs: tuple[Any, ...]  # nested tuples of floats, one per op input
    label: str
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """Ops that share one kind of discontinuity: op name -> detector, plus examples."""

    name: str
    detectors: Mapping[str, Detector]
    examples: tuple[Example, ...]


def normalise_op(op: str) -> str:
    """'aten::floor_divide.default', 'torch.floor', 'F.relu_' -> 'floor_divide', 'floor', 'relu'."""
    name = op.strip().lower().split("::")[-1]
    for prefix in ("torch.nn.functional.", "torch.special.", "torch.", "f.", "np.", "numpy."):
        name = name.removeprefix(prefix)
    name = name.split(".")[0]
    return name.rstrip("_") if name.endswith("_") and not name.startswith("_") else name


@dataclass(frozen=True)
class DetectorRegistry:
    """Families of detectors, indexed by op name at construction (an op belongs to one family)."""

    families: tuple[Family, ...]
    by_op: Mapping[str, Detector] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        table: dict[str, Detector] = {}
        for family in self.families:
            for op, detector in family.detectors.items():
                if op in table:
                    raise ValueError(f"op {op!r} is registered twice (again in family {family.name!r})")
                table[op] = detector
        object.__setattr__(self, "by_op", MappingProxyType(table))

    def labels_for(
        self,
        op: str,
        inputs: Sequence[np.ndarray],
        attrs: Mapping[str, Any] | None = None,
        near: Closeness = Closeness(),
    ) -> set[str]:
        """Discontinuity labels for `op` applied to `inputs`; empty for unknown ops and empty inputs."""
        detector = self.by_op.get(normalise_op(op))
        arrays = [np.asarray(x) for x in inputs]
        if detector is None or not arrays or any(x.size == 0 for x in arrays):
            return set()
        return set(detector(arrays, attrs or {}, near))


def _same(detector: Detector, *ops: str) -> dict[str, Detector]:
    return {op: detector for op in ops}


def _per_op(factory: Callable[[str], Detector], ops: Sequence[str]) -> dict[str, Detector]:
    return {op: factory(op) for op in ops}


def _k(attrs: Mapping[str, Any]) -> int | None:
    return int(attrs["k"]) + 1 if "k" in attrs else None


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "equal", "not_equal", "less", "less_equal", "greater")
_COMPARISONS += ("greater_equal", "maximum", "minimum", "fmax", "fmin")
_ORDERINGS = ("sort", "argsort", "msort", "kthvalue", "median", "nanmedian", "mode")
_POOLS = ("max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
_POOLS_WITH_INDICES = ("max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices")


def _value_families() -> tuple[Family, ...]:
    """Families whose output value jumps: rounding, casts, division, branch cuts, sign bits."""
    return (
        Family("round", _same(_round, "round", "rint", "nearbyint"), (Example("round", ((0.5, 1.25),), ROUNDING_TIE),)),
        Family(
            "to_integer",
            _same(_to_integer, "floor", "ceil", "trunc", "fix"),
            (Example("floor", ((2.0, 1.3),), ROUNDING_TIE),),
        ),
        Family(
            "cast",
            _same(_cast, "cast", "to", "type_as"),
            (
                Example("cast", ((3.0, 0.3),), ROUNDING_TIE, {"to": "int32"}),
                Example("cast", ((-1.5,),), CAST_OUT_OF_RANGE, {"to": "uint8"}),
                Example("cast", ((0.0, 2.0),), COMPARISON_TIE, {"to": "bool"}),
            ),
        ),
        Family(
            "integer_division",
            _same(_integer_division, "floor_divide", "remainder", "fmod"),
            (Example("floor_divide", ((6.0, 7.0), (3.0, 2.0)), ROUNDING_TIE),),
        ),
        Family(
            "division",
            _same(_division, "div", "divide", "true_divide"),
            (
                Example("div", ((1.0,), (0.0,)), BRANCH_CUT),
                Example("div", ((1.0,), (-0.0,)), SIGNED_ZERO),
                Example("div", ((7.5, 1.0), (2.5, 3.0)), ROUNDING_TIE, {"rounding_mode": "floor"}),
            ),
        ),
        Family(
            "atan2",
            _same(_atan2, "atan2", "arctan2"),
            (
                Example("atan2", ((-0.0,), (-1.0,)), BRANCH_CUT),
                Example("atan2", ((-0.0,), (-1.0,)), SIGNED_ZERO),
            ),
        ),
        Family("pow", _same(_pow, "pow", "float_power"), (Example("pow", ((-2.0, 2.0), (0.5, 0.5)), BRANCH_CUT),)),
        Family(
            "unary_branch",
            _per_op(_unary_branch, tuple(_BRANCH_POINTS)),
            (
                Example("log", ((0.0, 1.0),), BRANCH_CUT),
                Example("sqrt", ((-0.0,),), BRANCH_CUT),
                Example("asin", ((1.0, 0.2),), BRANCH_CUT),
                Example("reciprocal", ((-0.0,),), SIGNED_ZERO),
            ),
        ),
        Family(
            "sign_bit", _same(_copysign, "copysign", "signbit"), (Example("copysign", ((1.0,), (-0.0,)), SIGNED_ZERO),)
        ),
    )


def _choice_families() -> tuple[Family, ...]:
    """Families that choose between operands or positions: comparisons, thresholds, arg-reductions, pools."""
    return (
        Family(
            "comparison",
            _same(_comparison, *_COMPARISONS),
            (
                Example("lt", ((1.0, 2.0), (1.0, 3.0)), COMPARISON_TIE),
                Example("maximum", ((1.0, 2.0), (1.0000001, 3.0)), COMPARISON_TIE),
            ),
        ),
        Family(
            "threshold",
            _per_op(_threshold, tuple(_THRESHOLDS)),
            (
                Example("relu", ((0.0, 1.0),), COMPARISON_TIE),
                Example("clamp", ((0.5, 2.0),), COMPARISON_TIE, {"min": 0.5, "max": 1.0}),
                Example("clamp", ((0.5, 2.0), (0.0,), (2.0,)), COMPARISON_TIE),
                Example("hardtanh", ((-1.0,),), COMPARISON_TIE),
                Example("softshrink", ((-0.5,),), COMPARISON_TIE),
            ),
        ),
        Family(
            "min_max",
            {"max": _minmax(True), "min": _minmax(False)},
            (
                Example("max", ((1.0, 5.0), (1.0, 2.0)), COMPARISON_TIE),
                Example("max", ((5.0, 5.0, 1.0),), EQUAL_IN_ARGMAX, {"dim": 0}),
            ),
        ),
        Family(
            "arg_reduce",
            {
                **_same(_index_tie(True, lambda a: 2), "argmax", "nanargmax"),
                **_same(_index_tie(False, lambda a: 2), "argmin", "nanargmin"),
                "topk": _index_tie(True, _k),
                **_same(_index_tie(False, lambda a: None), *_ORDERINGS),
            },
            (
                Example("argmax", ((3.0, 3.0, 1.0),), EQUAL_IN_ARGMAX, {"dim": 0}),
                Example("argmin", ((1.0, 0.0, 0.0),), EQUAL_IN_ARGMAX),
                Example("topk", ((9.0, 4.0, 4.0, 1.0),), EQUAL_IN_ARGMAX, {"k": 2, "dim": 0}),
                Example("sort", ((2.0, 1.0, 2.0),), EQUAL_IN_ARGMAX, {"dim": -1}),
            ),
        ),
        Family(
            "pool_indices",
            {**_same(_pool_with_indices, *_POOLS), **_same(_pool_indices_always, *_POOLS_WITH_INDICES)},
            (
                Example("max_pool2d", ((((1.0, 1.0), (0.0, 0.5)),),), EQUAL_IN_ARGMAX, {"return_indices": True}),
                Example("max_pool2d_with_indices", ((((1.0, 1.0), (0.0, 0.5)),),), EQUAL_IN_ARGMAX),
            ),
        ),
    )


def _build_registry() -> DetectorRegistry:
    return DetectorRegistry(_value_families() + _choice_families())


REGISTRY = _build_registry()


def labels_for(
    op: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any] | None = None, near: Closeness = Closeness()
) -> set[str]:
    """Discontinuity labels for one op application (see REGISTRY for the op names understood)."""
    return REGISTRY.labels_for(op, inputs, attrs, near)


def output_labels(actual: np.ndarray, expected: np.ndarray) -> set[str]:
    """Labels read off an output pair: signed_zero where -0.0 meets +0.0."""
    return {SIGNED_ZERO} if has_signed_zero_mismatch(np.asarray(actual), np.asarray(expected)) else set()
