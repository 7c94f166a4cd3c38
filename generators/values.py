"""How a test's input values are drawn: its value strategy, chosen per test from the seed and recorded in the case.

Converter bugs live at special values that uniform draws in [-2, 2] never hit: signed zeros, exact integers,
halves (rounding ties), values near a dtype's overflow and underflow, integer extremes (an int64 that does not fit
int32), large magnitudes where an overflow-safe formulation lowered naively overflows. A strategy only changes the
first draw: the input search still steps and redraws until the source runs NaN/Inf-free, and the float64 twin and
the discontinuity labels still decide what is a bug. A tensor the graph gives a range (an operator's domain) keeps
every value inside it.
"""

from __future__ import annotations

import enum
import random

import torch

from generators.dtypes import DType
from generators.ir import TensorType


class ValueStrategy(str, enum.Enum):
    """The value in case.json is the name."""

    UNIFORM = "uniform"  # uniform in the dtype's default range (or the graph's range for the tensor)
    SPECIAL = "special"  # uniform, with about a third of the elements replaced by special values
    LARGE = "large"  # uniform over a large magnitude for the dtype


SPECIAL_SHARE = 0.3  # of the elements of a tensor drawn with SPECIAL
EXTREME_SHARE = 0.1  # of those special elements, the ones taken from near the dtype's limits
# Exact integers, signed zeros and halves (ties of round-half-to-even and of every rounding mode).
COMMON_FLOATS = (0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5)
COMMON_INTS = (0, 1, -1, 2, -2)
LARGE_MAGNITUDE = {DType.FLOAT16: 256.0, DType.BFLOAT16: 1e3, DType.FLOAT32: 1e3, DType.FLOAT64: 1e3}
LARGE_INT = {DType.INT8: 127, DType.UINT8: 255, DType.INT32: 2**20, DType.INT64: 2**20}


def extreme_values(dtype: DType) -> tuple[float, ...]:
    """Values near the dtype's overflow and underflow; an int64 gets int32's extremes (a narrowing converter's
    trap)."""
    if dtype.is_float:
        info = torch.finfo(dtype.torch)
        subnormal = info.smallest_normal * info.eps
        return (info.max / 4, -info.max / 4, info.smallest_normal, -info.smallest_normal, subnormal)
    if dtype is DType.INT64:
        return (2**31 - 1, -(2**31), 2**31)
    if dtype.is_int:
        info = torch.iinfo(dtype.torch)
        return (info.max, info.min, info.max - 1)
    return ()


def special_pool(dtype: DType, bounds: tuple[float, float] | None) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(common, extreme) special values of the dtype, inside `bounds` (the graph's range for the tensor) if any."""
    if bounds is None:
        bounds = (float(torch.iinfo(dtype.torch).min), float(torch.iinfo(dtype.torch).max)) if dtype.is_int \
            else (-float("inf"), float("inf"))
    lo, hi = bounds
    common = COMMON_FLOATS if dtype.is_float else COMMON_INTS if dtype.is_int else ()
    return tuple(v for v in common if lo <= v <= hi), tuple(v for v in extreme_values(dtype) if lo <= v <= hi)


def with_specials(base: torch.Tensor, ttype: TensorType, gen: torch.Generator,
                  bounds: tuple[float, float] | None) -> torch.Tensor:
    """`base` with about SPECIAL_SHARE of its elements replaced by special values (inside `bounds`, the graph's
    range for the tensor, when it gives one), drawn from `gen`."""
    common, extreme = special_pool(ttype.dtype, bounds)
    if not common and not extreme or base.numel() == 0:
        return base
    out = base.to(torch.float64 if ttype.dtype.is_float else torch.int64).clone()
    chosen = torch.rand(ttype.shape, generator=gen, dtype=torch.float64) < SPECIAL_SHARE
    rare = torch.rand(ttype.shape, generator=gen, dtype=torch.float64) < EXTREME_SHARE
    for pool, where in ((common, chosen & ~rare), (extreme, chosen & rare)):
        if not pool:
            continue
        picks = torch.randint(len(pool), ttype.shape, generator=gen)
        values = torch.tensor(pool, dtype=out.dtype)[picks]
        out = torch.where(where, values, out)
    return out.to(ttype.dtype.torch)


def large_range(dtype: DType, lo: float, hi: float, ranged: bool) -> tuple[float, float]:
    """Where LARGE draws a tensor from: the graph's own range when it gives one, else a large magnitude."""
    if ranged or dtype is DType.BOOL:
        return lo, hi
    if dtype.is_float:
        return -LARGE_MAGNITUDE[dtype], LARGE_MAGNITUDE[dtype]
    top = LARGE_INT[dtype]
    return (0, top) if dtype is DType.UINT8 else (-top, top)


# How often each strategy is drawn when all are allowed: uniform stays the common case.
STRATEGY_WEIGHTS = {ValueStrategy.UNIFORM: 0.5, ValueStrategy.SPECIAL: 0.3, ValueStrategy.LARGE: 0.2}


def draw_strategy(seed: int, allowed: tuple[ValueStrategy, ...] = tuple(ValueStrategy)) -> ValueStrategy:
    """The value strategy of the test of `seed`, among `allowed` (by STRATEGY_WEIGHTS)."""
    if len(allowed) == 1:
        return allowed[0]
    rng = random.Random(f"values:{seed}")
    return rng.choices(allowed, weights=[STRATEGY_WEIGHTS[s] for s in allowed])[0]
