"""Comparisons, logical ops, where, clamp and the float predicates (isnan, isinf, ...): mostly bool outputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

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
    call,
    function_source,
)
from generators.ops.discontinuity import Detector, Thresholds, comparison, sign_bit


class Compare(BroadcastBinary):
    """Two inputs of one dtype, broadcast together; the output is bool."""

    family = "compare"
    # The Python operator the op's lambda applies (`a == b`); None: `fn` is a public torch function.
    symbol: ClassVar[str | None] = None

    def result_dtype(self, dtype: DType) -> DType:
        return DType.BOOL

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if self.symbol is None:
            return super().torch_source(attrs, args)
        a, b = args
        return f"{a} {self.symbol} {b}"


def _cmp(name: str, fn: Callable, dtypes=ALL, *, symbol: str | None = None,
         discontinuity: Detector | None = None) -> type[Compare]:
    sigs = tuple(Sig((d, d), DType.BOOL) for d in dtypes)
    # staticmethod: a detector that is a plain function (comparison) must not bind to the op as a method.
    return type(name, (Compare,), {"name": name, "fn": staticmethod(fn), "sigs": sigs, "symbol": symbol,
                                   "discontinuity": staticmethod(discontinuity)})


class Predicate(OpSpec):
    """An elementwise test of one tensor: same shape, bool output."""

    family = "compare"
    ranks = (ANY_RANK,)
    fn: Callable[[torch.Tensor], torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, DType.BOOL)])

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args)


def _pred(name: str, fn: Callable, dtypes=FLOATS, *, discontinuity: Detector | None = None) -> type[Predicate]:
    sigs = tuple(Sig((d,), DType.BOOL) for d in dtypes)
    # staticmethod, as in _cmp: sign_bit is a plain function.
    return type(name, (Predicate,), {"name": name, "fn": staticmethod(fn), "sigs": sigs,
                                     "discontinuity": staticmethod(discontinuity)})


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

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.isclose", args, rtol=attrs["rtol"], atol=attrs["atol"], equal_nan=attrs["equal_nan"])


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

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.where", args)


# Float clamp bounds: every min is <= every max, so any pair is a valid interval (equal pairs included).
FLOAT_MINS = (-1.5, -1.0, -0.5, 0.0, 0.25, 0.5)
FLOAT_MAXES = (0.5, 1.0, 1.5, 2.0, 6.0)


class Clamp(OpSpec):
    """torch.clamp with both bounds, only min, or only max; int bounds for int tensors."""

    name = "clamp"
    family = "compare"
    ranks = (ANY_RANK,)
    sigs = tuple(Sig((d,), d) for d in FLOATS + INTS)
    # The input meets a bound where it is clamped: the attributes min and max (None: that side is open).
    discontinuity = Thresholds((("min", None), ("max", None)))

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

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        bounds = {side: attrs[side] for side in ("min", "max") if attrs[side] is not None}
        return call("torch.clamp", args, **bounds)


OPS: list[type[OpSpec]] = [
    _cmp("eq", lambda a, b: a == b, symbol="==", discontinuity=comparison),
    _cmp("ne", lambda a, b: a != b, symbol="!=", discontinuity=comparison),
    _cmp("lt", lambda a, b: a < b, symbol="<", discontinuity=comparison),
    _cmp("le", lambda a, b: a <= b, symbol="<=", discontinuity=comparison),
    _cmp("gt", lambda a, b: a > b, symbol=">", discontinuity=comparison),
    _cmp("ge", lambda a, b: a >= b, symbol=">=", discontinuity=comparison),
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
    _pred("signbit", torch.signbit, FLOATS + SIGNED_INTS, discontinuity=sign_bit),
]
