"""Scans along one dim beyond cumsum/cumprod (shape.py): logcumsumexp."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from generators.dtypes import FLOATS
from generators.ops.base import AttrMap, Build, BuildContext, OpSpec, SymTensor, call, pick_axis, same_sigs


class LogCumSumExp(OpSpec):
    """log(cumsum(exp(x))) along `dim`, computed without overflow (floats only)."""

    name = "logcumsumexp"
    family = "cumulative"
    ranks = ((0, 1, 2, 3, 4, 5),)
    sigs = same_sigs(FLOATS)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank) if x.rank else ctx.choice("dim", (0, -1))
        return Build([SymTensor(x.shape, x.dtype)], [], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.logcumsumexp(x, attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.logcumsumexp", args, attrs["dim"])


OPS: list[type[OpSpec]] = [LogCumSumExp]
