"""Comparisons, logical ops, where, clamp and the float predicates (isnan, isinf, ...): mostly bool outputs."""

from __future__ import annotations

from collections.abc import Callable

import torch

from generators.dtypes import ALL, FLOATS, INTS, NUMERIC, SIGNED_INTS, DType
from generators.ops.base import (
    ANY_RANK,
    AttrMap,
    BroadcastBinary,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    broadcast,
)


class Compare(BroadcastBinary):
    """Two inputs of one dtype, broadcast together; the output is bool."""

    family = "compare"

    def result_dtype(self, dtype: DType) -> DType:
        return DType.BOOL


def _cmp(name: str, fn: Callable, dtypes=ALL) -> type[Compare]:
    sigs = tuple(Sig((d, d), DType.BOOL) for d in dtypes)
    return type(name, (Compare,), {"name": name, "fn": staticmethod(fn), "sigs": sigs})


class Predicate(OpSpec):
    """An elementwise test of one tensor: same shape, bool output."""

    family = "compare"
    ranks = (ANY_RANK,)
    fn: Callable[[torch.Tensor], torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, DType.BOOL)])

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x)


def _pred(name: str, fn: Callable, dtypes=FLOATS) -> type[Predicate]:
    sigs = tuple(Sig((d,), DType.BOOL) for d in dtypes)
    return type(name, (Predicate,), {"name": name, "fn": staticmethod(fn), "sigs": sigs})


class IsClose(Compare):
    """torch.isclose with varied tolerances and equal_nan."""

    name = "isclose"
    sigs = tuple(Sig((d, d), DType.BOOL) for d in NUMERIC)

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build:
        out = super().build(ctx, a, b)
        out.attrs = {
            "rtol": ctx.choice("rtol", (1e-5, 0.0, 1e-2, 0.5)),
            "atol": ctx.choice("atol", (1e-8, 0.0, 1e-3, 0.5)),
            "equal_nan": ctx.choice("equal_nan", (False, True)),
        }
        return out

    def forward(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.isclose(a, b, rtol=attrs["rtol"], atol=attrs["atol"], equal_nan=attrs["equal_nan"])


class Where(OpSpec):
    """torch.where(cond, a, b): all three broadcast together; output has the value dtype."""

    name = "where"
    family = "compare"
    ranks = (ANY_RANK, ANY_RANK, ANY_RANK)
    sigs = tuple(Sig((DType.BOOL, d, d), d) for d in ALL)

    def build(self, ctx: BuildContext, cond: SymTensor, a: SymTensor, b: SymTensor) -> Build:
        ab, reqs_ab = broadcast(a.shape, b.shape)
        shape, reqs = broadcast(cond.shape, ab)
        return Build([SymTensor(shape, a.dtype)], reqs_ab + reqs)

    def forward(self, attrs: AttrMap, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(cond, a, b)


# Float clamp bounds: every min is <= every max, so any pair is a valid interval (equal pairs included).
FLOAT_MINS = (-1.5, -1.0, -0.5, 0.0, 0.25, 0.5)
FLOAT_MAXES = (0.5, 1.0, 1.5, 2.0, 6.0)


class Clamp(OpSpec):
    """torch.clamp with both bounds, only min, or only max; int bounds for int tensors."""

    name = "clamp"
    family = "compare"
    ranks = (ANY_RANK,)
    sigs = tuple(Sig((d,), d) for d in FLOATS + INTS)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        sides = ctx.choice("sides", ("both", "both", "min", "max"))
        lo, hi, reqs = self._bounds(ctx, x.dtype)
        attrs = {"min": lo if sides != "max" else None, "max": hi if sides != "min" else None}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    @staticmethod
    def _bounds(ctx: BuildContext, dtype: DType) -> tuple:
        if dtype.is_float:
            return ctx.choice("min", FLOAT_MINS), ctx.choice("max", FLOAT_MAXES), []
        # Around the values inputs are drawn from, so both sides of each bound are hit.
        lo_range = (0, 15) if dtype is DType.UINT8 else (-10, 10)
        lo = ctx.int_attr("min", *lo_range)
        hi = ctx.int_attr("max", *lo_range)
        return lo, hi, [lo <= hi]

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=attrs["min"], max=attrs["max"])


OPS: list[type[OpSpec]] = [
    _cmp("eq", lambda a, b: a == b),
    _cmp("ne", lambda a, b: a != b),
    _cmp("lt", lambda a, b: a < b),
    _cmp("le", lambda a, b: a <= b),
    _cmp("gt", lambda a, b: a > b),
    _cmp("ge", lambda a, b: a >= b),
    _cmp("logical_and", torch.logical_and),
    _cmp("logical_or", torch.logical_or),
    _cmp("logical_xor", torch.logical_xor),
    IsClose,
    Where,
    Clamp,
    _pred("isnan", torch.isnan),
    _pred("isinf", torch.isinf),
    _pred("isfinite", torch.isfinite),
    _pred("isposinf", torch.isposinf),
    _pred("isneginf", torch.isneginf),
    _pred("signbit", torch.signbit, FLOATS + SIGNED_INTS),
]
