"""Precision-aware blame: is a diverging target wrong, or is the float32 source the inexact one?

Errors are measured against the float64 reference, rounded to the output dtype (the correctly rounded
answer is the best any implementation of that dtype can give), in units of the dtype's tolerance:
err = max |x - ref| / (atol + rtol * |ref|), so err <= 1 means "within tolerance of the reference".

The target is blamed only when the source is close to the reference (err_s <= 1), the target is not
(err_t > 1), and the target is BLAME_FACTOR times further off than the source: err_t > K * max(err_s, 1/K).
The floor 1/K makes "source exact" reduce to "target outside tolerance". A source outside tolerance of its
own reference means a numerically unstable graph: it excuses a target error of its own size, labelled
"unstable-source", but not one far beyond it: a target more than UNSTABLE_FACTOR times further from the
reference than the unstable source is still blamed ("diverges-beyond-unstable-source"); for integers, more
than UNSTABLE_FACTOR times as many wrong elements.

A float64 output computed through an attribute a format can only store as float32 (ONNX's float attributes:
LayerNormalization's epsilon, LeakyRelu's alpha) is judged at the precision it could have: a target within
tolerance of the reference computed with those attributes rounded to float32 is not blamed ("float32-attribute");
otherwise its error is its distance from the nearer of the two references.

A blamed target is still excused where the source's own answer is unreliable, and the reason says why: a baseline
from a framework that flushes subnormals to zero (TensorFlow on a CPU, whose float64 twin flushes float64 subnormals
alike) is "denormals-flushed" when it is the source computed so and the target is not to blame against the IEEE
source and its float64 twin; an output that differs only where the source's integers overflowed (wrapped in torch,
saturated elsewhere, neither specified by ONNX) is "integer-overflow"; a target that is Inf or NaN only where an
input beyond the square root of its dtype's largest value reaches (a decomposition's x * x overflows where a fused
kernel does not) is "extreme-input-overflow".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from oracles.compare import FLOAT_DTYPES, STORAGE, Tolerance, compare, default_tolerance, mismatch_mask

BLAME_FACTOR = 10.0
# How much further than an unstable source a target must be to be blamed anyway: the same resolution as for a
# stable one. A correct target's rounding is amplified by the same unstable graph (in tests/test_planted_faults.py
# one stood 2.5 times farther than its source); at 100, faults that moved an unstable graph's output 10 to 100
# times the source's error passed as "unstable-source" there.
UNSTABLE_FACTOR = BLAME_FACTOR
UNSTABLE_SOURCE = "unstable-source"
BEYOND_UNSTABLE = "diverges-beyond-unstable-source"
FLOAT32_ATTRIBUTE = "float32-attribute"
DENORMALS_FLUSHED = "denormals-flushed"
INTEGER_OVERFLOW = "integer-overflow"
EXTREME_INPUT_OVERFLOW = "extreme-input-overflow"


@dataclass(frozen=True)
class BlameResult:
    """Whether the target is to blame for one output, with both errors in tolerance units (counts for ints).

    reason: "target-diverges" or "diverges-beyond-unstable-source" (blamed), "within-tolerance",
    "comparable-error", "unstable-source", "float32-attribute" or "shape"; or why an unreliable source excuses a
    target blamed otherwise ("denormals-flushed", "integer-overflow", "extreme-input-overflow").
    """

    blamed: bool
    target_error: float
    source_error: float
    ratio: float
    reason: str

    @property
    def unstable_source(self) -> bool:
        return self.reason == UNSTABLE_SOURCE


def round_to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round a float64 array to `dtype` (nearest-even) and return it as float64."""
    with np.errstate(over="ignore"):  # overflow to inf is the correctly rounded answer
        if dtype == "bfloat16":
            return _round_bfloat16(x.astype(np.float32)).astype(np.float64)
        if dtype in FLOAT_DTYPES:
            return x.astype(STORAGE[dtype]).astype(np.float64)
    return x.astype(np.float64)


def _round_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest-even bfloat16, kept in float32 storage; NaN stays NaN."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def normalised_error(x: np.ndarray, reference: np.ndarray, dtype: str, tol: Tolerance | None = None) -> float:
    """Distance of `x` from the (rounded) float64 reference in tolerance units; NaN/Inf mismatch = inf.

    For integer and bool dtypes: the number of elements that differ.
    """
    if dtype not in FLOAT_DTYPES:
        return float(np.count_nonzero(x.astype(np.float64) != reference.astype(np.float64)))
    tol = default_tolerance(dtype) if tol is None else tol
    a, r = x.astype(np.float64), round_to_dtype(reference.astype(np.float64), dtype)
    nan_a, nan_r = np.isnan(a), np.isnan(r)
    finite = np.isfinite(a) & np.isfinite(r)
    if (nan_a != nan_r).any() or ((~finite & ~nan_a & ~nan_r) & (a != r)).any():
        return math.inf
    diff = np.abs(a[finite] - r[finite])
    scale = tol.atol + tol.rtol * np.abs(r[finite])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a float64 diff / a tiny scale: inf units
        units = np.where(diff == 0, 0.0, diff / scale)
    return float(units.max()) if units.size else 0.0


def source_unreliable(source: np.ndarray, reference: np.ndarray, dtype: str, tol: Tolerance | None = None) -> bool:
    """True when the source itself is outside tolerance of the float64 reference (an unstable graph)."""
    limit = 0.0 if dtype not in FLOAT_DTYPES else 1.0
    return normalised_error(source, reference, dtype, tol) > limit


def blame_output(
    source: np.ndarray,
    target: np.ndarray,
    reference: np.ndarray,
    dtype: str,
    tol: Tolerance | None = None,
    factor: float = BLAME_FACTOR,
    rounded: np.ndarray | None = None,
) -> BlameResult:
    """Decide whether the target is to blame for one output (see the module docstring for the rule); `rounded`:
    the reference computed with float32-stored attributes rounded, where the graph has any."""
    if source.shape != reference.shape:
        raise ValueError(f"source shape {source.shape} differs from reference shape {reference.shape}")
    if target.shape != reference.shape:
        return BlameResult(True, math.inf, 0.0, math.inf, "shape")
    err_t = normalised_error(target, reference, dtype, tol)
    err_s = normalised_error(source, reference, dtype, tol)
    exact = dtype not in FLOAT_DTYPES
    if rounded is not None and not exact and rounded.shape == reference.shape:
        err_r = normalised_error(target, rounded, dtype, tol)
        if err_t > 1.0 >= err_r:
            return BlameResult(False, err_r, err_s, _ratio(err_r, max(err_s, 1.0 / factor)), FLOAT32_ATTRIBUTE)
        err_t = min(err_t, err_r)
    limit, floor = (0.0, 1.0) if exact else (1.0, 1.0 / factor)
    ratio = _ratio(err_t, max(err_s, floor) if not exact else err_s)
    if err_s > limit:
        beyond = err_t > UNSTABLE_FACTOR * err_s
        return BlameResult(beyond, err_t, err_s, ratio, BEYOND_UNSTABLE if beyond else UNSTABLE_SOURCE)
    if err_t <= limit:
        return BlameResult(False, err_t, err_s, ratio, "within-tolerance")
    if exact or err_t > factor * max(err_s, floor):
        return BlameResult(True, err_t, err_s, ratio, "target-diverges")
    return BlameResult(False, err_t, err_s, ratio, "comparable-error")


def flush_explains(baseline: np.ndarray, target: np.ndarray, flushed: np.ndarray, eager: np.ndarray,
                   ieee: np.ndarray, dtype: str) -> bool:
    """Whether flushing subnormals explains a baseline the target differs from: the baseline is the source run with
    them flushed (`flushed`), which differs from the IEEE run (`eager`), and the target is not to blame against the
    IEEE run and its float64 twin (`ieee`)."""
    if dtype not in FLOAT_DTYPES or not flushed.shape == eager.shape == ieee.shape == baseline.shape:
        return False
    return (compare(baseline, flushed, dtype).ok and not compare(eager, flushed, dtype).ok
            and not blame_output(eager, target, ieee, dtype).blamed)


def differs_only_where(actual: np.ndarray, baseline: np.ndarray, dtype: str, where: np.ndarray) -> bool:
    """Whether `actual` differs from `baseline` (by compare's rules) somewhere, and only at positions in `where`."""
    if not actual.shape == baseline.shape == where.shape:
        return False
    bad = mismatch_mask(actual, baseline, dtype)
    return bool(bad.any()) and not bool((bad & ~where).any())


def blame_all(
    sources: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    dtypes: Sequence[str],
) -> tuple[BlameResult, ...]:
    """Blame per output; the target is to blame overall if any output blames it."""
    if not len(sources) == len(targets) == len(references) == len(dtypes):
        raise ValueError("sources, targets, references and dtypes must have one entry per output")
    return tuple(blame_output(s, t, r, d) for s, t, r, d in zip(sources, targets, references, dtypes, strict=True))


def _ratio(err_t: float, err_s: float) -> float:
    if err_s == 0:
        return 0.0 if err_t == 0 else math.inf
    return err_t / err_s
