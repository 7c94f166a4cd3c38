"""Settling which of tied elements an index output names, so two correct answers compare equal.

torch leaves the index among equal values unspecified (sort with stable=False, topk), or names the first one
(argmax, max(dim)) while a tie in the float32 source is one rounding away from no tie in a converted model; either
way an index is judged by the value it points at. `settle_tied_indices` rewrites each index to a canonical one
holding the same value, which a wrong index (pointing at another value) cannot reach. Float values a few ulps apart
count as one value: a converted model computes them upstream in another order or with another kernel, and a 1-ulp
change flips which of them is larger.
"""

from __future__ import annotations

import numpy as np

# How far apart, relative to their magnitude, two floats may be and still be one value to an index: at least 1e-6
# (about 8 float32 ulps, discontinuity.Closeness's "near"), and 8 ulps of a coarser dtype (float16).
NEAR_TIE_REL = 1e-6
NEAR_TIE_ULPS = 8


def settle_tied_indices(x: np.ndarray, indices: np.ndarray, axis: int | None, keepdim: bool = True) -> np.ndarray:
    """`indices` into `x` along `axis` (None: into x flattened), each group of picks of one value replaced by the
    first positions of `x` holding that value, in the picks' order. Left as they are: out-of-range or repeated
    indices (a wrong answer must stay wrong) and NaN picks. `keepdim=False`: the reduced axis is absent."""
    x, indices = np.asarray(x), np.asarray(indices)
    if x.size == 0 or indices.size == 0 or indices.dtype.kind not in "iu":
        return indices
    if axis is None:
        lines, picks = x.reshape(1, -1), indices.reshape(1, -1)
    else:
        axis %= max(x.ndim, 1)
        if x.ndim == 0:
            return indices
        full = indices if keepdim else np.expand_dims(indices, axis)
        if full.ndim != x.ndim:
            return indices
        lines = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
        picks = np.moveaxis(full, axis, -1).reshape(lines.shape[0], -1)
    lines = merge_near_ties(lines)
    if picks.shape[1] == 1:
        settled = _settle_single_picks(lines, picks[:, 0])[:, None]
    else:
        settled = np.array([_settle_line(line, line_picks) for line, line_picks in zip(lines, picks, strict=True)])
    if axis is None:
        return settled.reshape(indices.shape).astype(indices.dtype)
    shape = np.moveaxis(full, axis, -1).shape
    out = np.moveaxis(settled.reshape(shape), -1, axis)
    return (out if keepdim else np.squeeze(out, axis)).astype(indices.dtype)


def _settle_line(line: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """One line: picks of equal value get that value's first positions, in order."""
    if picks.min() < 0 or picks.max() >= line.size or np.unique(picks).size != picks.size:
        return picks.copy()
    values, out = line[picks], picks.copy()
    for value in np.unique(values[values == values]):  # NaN picks (value != value) stay
        where = np.flatnonzero(values == value)
        out[where] = np.flatnonzero(line == value)[: where.size]
    return out


def _settle_single_picks(lines: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """_settle_line for lines of one pick each (argmax, max(dim)), all lines at once: the first position holding
    the picked value; out-of-range and NaN picks stay."""
    inside = (picks >= 0) & (picks < lines.shape[1])
    values = lines[np.arange(lines.shape[0]), np.where(inside, picks, 0)]
    first = (lines == values[:, None]).argmax(axis=1)
    return np.where(inside & (values == values), first, picks)


def merge_near_ties(lines: np.ndarray) -> np.ndarray:
    """Each row of `lines` with every run of near neighbours (in sorted order) set to the run's smallest value; rows
    of integers, and NaN, are left as they are."""
    if lines.dtype.kind != "f" or lines.shape[-1] < 2:
        return lines
    rel = max(NEAR_TIE_REL, NEAR_TIE_ULPS * float(np.finfo(lines.dtype).eps))
    order = np.argsort(lines, axis=-1, kind="stable")
    ordered = np.take_along_axis(lines, order, axis=-1).astype(np.float64)
    low, high = ordered[:, :-1], ordered[:, 1:]
    with np.errstate(invalid="ignore"):  # inf - inf and NaN: not near (equal infinities stay equal regardless)
        near = np.abs(high - low) <= rel * np.maximum(np.abs(low), np.abs(high))
    starts = np.concatenate([np.ones((lines.shape[0], 1), dtype=bool), ~near], axis=1)
    first = np.maximum.accumulate(np.where(starts, np.arange(lines.shape[1]), 0), axis=1)
    merged = np.empty_like(lines)
    np.put_along_axis(merged, order, np.take_along_axis(ordered, first, axis=1).astype(lines.dtype), axis=1)
    return merged
