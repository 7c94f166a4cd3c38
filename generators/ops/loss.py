"""Loss functions between a prediction and a target of one shape: mse_loss, kl_div (reductions none, sum, mean)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS
from generators.ops.base import (
    ANY_RANK,
    SAFE_EXP_ARG,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    call,
    clamp_penalty,
    same_sigs,
)
from generators.terms import eq

TINY = 1e-3


class Loss(OpSpec):
    """`fn(input, target, reduction, ...)` over two inputs of one shape; 'none' keeps it, the others give a scalar."""

    family = "loss"
    ranks = (ANY_RANK, ANY_RANK)
    sigs = same_sigs(FLOATS, 2)
    value_range = (0.0, float("inf"))

    def build(self, ctx: BuildContext, x: SymTensor, target: SymTensor) -> Build | None:
        if x.rank != target.rank:
            return None
        attrs = {"reduction": ctx.choice("reduction", self.reductions(x.rank)), **self.attrs(ctx)}
        out = x.shape if attrs["reduction"] == "none" else ()
        return Build([SymTensor(out, x.dtype)], [eq(a, b) for a, b in zip(x.shape, target.shape)], attrs)

    def reductions(self, rank: int) -> tuple[str, ...]:
        return ("none", "sum", "mean")

    def attrs(self, ctx: BuildContext) -> dict:
        return {}


class MseLoss(Loss):
    """F.mse_loss: the squared difference, reduced."""

    name = "mse_loss"

    def forward(self, attrs: AttrMap, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(x, target, reduction=attrs["reduction"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.mse_loss", args, reduction=attrs["reduction"])


class KlDiv(Loss):
    """F.kl_div(input, target): input holds log-probabilities, target probabilities (log_target: log ones); the
    target is kept positive and small enough that exp(target) is finite, which fits both readings. Its pointwise
    terms can be negative, so the result has no known range."""

    name = "kl_div"
    value_range = None
    input_domain = (None, (TINY, SAFE_EXP_ARG))

    def reductions(self, rank: int) -> tuple[str, ...]:
        return ("none", "sum", "batchmean") if rank else ("none", "sum")  # batchmean divides by the first dim

    def attrs(self, ctx: BuildContext) -> dict:
        return {"log_target": ctx.choice("log_target", (False, True))}

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor | None:
        return clamp_penalty(target, lo=TINY, hi=SAFE_EXP_ARG)

    def forward(self, attrs: AttrMap, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.kl_div(x, target, reduction=attrs["reduction"], log_target=attrs["log_target"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.kl_div", args, reduction=attrs["reduction"], log_target=attrs["log_target"])


OPS: list[type[OpSpec]] = [MseLoss, KlDiv]
