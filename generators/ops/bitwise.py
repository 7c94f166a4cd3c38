"""Bitwise and/or/xor on ints and bools (broadcast), and shifts by a constant amount (`x << k`, `x >> k`)."""

from __future__ import annotations

from collections.abc import Callable

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
    same_sigs,
)

BITS = {DType.INT8: 8, DType.UINT8: 8, DType.INT32: 32, DType.INT64: 64}


class Bitwise(BroadcastBinary):
    """Two inputs of one int or bool dtype, broadcast together; output keeps the dtype."""

    family = "bitwise"
    sigs = same_sigs(INTS + (DType.BOOL,), 2)


def _bitwise(name: str, fn: Callable) -> type[Bitwise]:
    return type(name, (Bitwise,), {"name": name, "fn": staticmethod(fn)})


class Shift(OpSpec):
    """`x << k` or `x >> k` with k in [0, bits - 1] (larger shifts are undefined in C++)."""

    family = "bitwise"
    ranks = (ANY_RANK,)
    sigs = tuple(Sig((d,), d) for d in INTS)
    fn: Callable[[torch.Tensor, int], torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        amount = ctx.int_attr("amount", 0, BITS[x.dtype] - 1)
        return Build([SymTensor(x.shape, x.dtype)], attrs={"amount": amount})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, attrs["amount"])


def _shift(name: str, fn: Callable) -> type[Shift]:
    return type(name, (Shift,), {"name": name, "fn": staticmethod(fn)})


OPS: list[type[OpSpec]] = [
    _bitwise("bitwise_and", lambda a, b: a & b),
    _bitwise("bitwise_or", lambda a, b: a | b),
    _bitwise("bitwise_xor", lambda a, b: a ^ b),
    _shift("bitwise_left_shift", lambda x, k: x << k),
    _shift("bitwise_right_shift", lambda x, k: x >> k),
]
