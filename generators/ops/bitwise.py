"""Bitwise and/or/xor on ints and bools (broadcast), and shifts by a constant amount (`x << k`, `x >> k`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import torch

from generators.dtypes import INTS, DType
from generators.ops.base import (
    ANY_RANK,
    AttrMap,
    BroadcastBinary,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    literal,
    same_sigs,
)

BITS = {DType.INT8: 8, DType.UINT8: 8, DType.INT32: 32, DType.INT64: 64}


class Bitwise(BroadcastBinary):
    """Two inputs of one int or bool dtype, broadcast together; output keeps the dtype."""

    family = "bitwise"
    sigs = same_sigs(INTS + (DType.BOOL,), 2)
    # The Python operator the op's lambda applies: `a & b`.
    symbol: ClassVar[str]

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        a, b = args
        return f"{a} {self.symbol} {b}"


def _bitwise(name: str, fn: Callable, symbol: str) -> type[Bitwise]:
    return type(name, (Bitwise,), {"name": name, "fn": staticmethod(fn), "symbol": symbol})


class Shift(OpSpec):
    """`x << k` or `x >> k` with k in [0, bits - 1] (larger shifts are undefined in C++)."""

    family = "bitwise"
    ranks = (ANY_RANK,)
    sigs = tuple(Sig((d,), d) for d in INTS)
    fn: Callable[[torch.Tensor, int], torch.Tensor]
    # The Python operator the op's lambda applies: `x << k`.
    symbol: ClassVar[str]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        amount = ctx.int_attr("amount", 0, BITS[x.dtype] - 1)
        return Build([SymTensor(x.shape, x.dtype)], attrs={"amount": amount})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, attrs["amount"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        (x,) = args
        return f"{x} {self.symbol} {literal(attrs['amount'])}"


def _shift(name: str, fn: Callable, symbol: str) -> type[Shift]:
    return type(name, (Shift,), {"name": name, "fn": staticmethod(fn), "symbol": symbol})


OPS: list[type[OpSpec]] = [
    _bitwise("bitwise_and", lambda a, b: a & b, "&"),
    _bitwise("bitwise_or", lambda a, b: a | b, "|"),
    _bitwise("bitwise_xor", lambda a, b: a ^ b, "^"),
    _shift("bitwise_left_shift", lambda x, k: x << k, "<<"),
    _shift("bitwise_right_shift", lambda x, k: x >> k, ">>"),
]
