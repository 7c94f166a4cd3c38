"""Activation functions from torch.nn.functional, every parameter varied (slopes, alphas, thresholds, dims)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS, INTS
from generators.ops.base import (
    ANY_RANK,
    SAFE_EXP_ARG,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    pick_axis,
    same_sigs,
)


class Activation(OpSpec):
    """Elementwise `fn(x, **attrs)`; each attribute is picked from `choices` (first option = PyTorch default)."""

    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    choices: ClassVar[Mapping[str, Sequence[Any]]] = {}
    fn: Callable[..., torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        attrs = {k: ctx.choice(k, options) for k, options in self.choices.items()}
        return Build([SymTensor(x.shape, x.dtype)], attrs=attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, **attrs)


def _act(name: str, fn: Callable, dtypes=FLOATS, **choices: Sequence[Any]) -> type[Activation]:
    body = {"name": name, "fn": staticmethod(fn), "sigs": same_sigs(dtypes), "choices": choices}
    return type(name, (Activation,), body)


class Softplus(Activation):
    """exp(beta * x) is evaluated below the threshold: keep it finite even in float16."""

    name = "softplus"
    fn = staticmethod(F.softplus)
    choices = {"beta": (1.0, 0.5, 2.0, 10.0), "threshold": (20.0, 1.0, 5.0)}

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        return torch.relu(x.float() * attrs["beta"] - SAFE_EXP_ARG).sum()


class SoftmaxLike(OpSpec):
    """softmax / log_softmax / softmin along one dim (negative dims too)."""

    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    fn: Callable[..., torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank) if x.rank else ctx.choice("dim", (0, -1))
        return Build([SymTensor(x.shape, x.dtype)], attrs={"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, dim=attrs["dim"])


def _softmax(name: str, fn: Callable) -> type[SoftmaxLike]:
    return type(name, (SoftmaxLike,), {"name": name, "fn": staticmethod(fn)})


class Glu(OpSpec):
    """F.glu halves one dim, whose size must be even."""

    name = "glu"
    family = "activation"
    ranks = ((1, 2, 3, 4, 5),)
    sigs = same_sigs(FLOATS)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        size = x.shape[dim]
        shape = tuple(size / 2 if i == dim % x.rank else d for i, d in enumerate(x.shape))
        return Build([SymTensor(shape, x.dtype)], [size % 2 == 0], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.glu(x, dim=attrs["dim"])


class Prelu(OpSpec):
    """F.prelu with a weight of 1 or C (= dim 1 of the input) slopes."""

    name = "prelu"
    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        weight = ctx.weight(1, x.dtype)
        per_channel = x.rank >= 2 and ctx.choice("per_channel", (False, True))
        channels = x.shape[1] if per_channel else 1
        return Build([SymTensor(x.shape, x.dtype)], [weight.shape[0] == channels])

    def forward(self, attrs: AttrMap, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.prelu(x, weight)


INF = float("inf")
# Value ranges of the activations whose output is bounded whatever the input (used to avoid infeasible graphs).
RANGES: dict[str, tuple[float, float]] = {
    "relu": (0, INF), "relu6": (0, 6), "softplus": (0, INF), "hardsigmoid": (0, 1), "logsigmoid": (-INF, 0),
    "softsign": (-1, 1), "softmax": (0, 1), "log_softmax": (-INF, 0), "softmin": (0, 1), "silu": (-0.279, INF),
    "mish": (-0.309, INF), "gelu": (-0.171, INF), "hardswish": (-0.375, INF),
}


# Activations that map a whole interval to exactly 0.
ZERO_EMITTERS = frozenset({"relu", "relu6", "hardshrink", "softshrink", "threshold", "hardsigmoid", "hardswish"})


def _with_ranges(ops: list[type[OpSpec]]) -> list[type[OpSpec]]:
    for op in ops:
        if op.name in RANGES:
            op.value_range = RANGES[op.name]
        op.emits_zeros = op.name in ZERO_EMITTERS
    return ops


OPS: list[type[OpSpec]] = _with_ranges([
    _act("relu", F.relu, FLOATS + INTS),
    _act("relu6", F.relu6, FLOATS + INTS),
    _act("gelu", F.gelu, approximate=("none", "tanh")),
    _act("silu", F.silu),
    _act("mish", F.mish),
    _act("leaky_relu", F.leaky_relu, negative_slope=(0.01, 0.0, 0.1, 0.2, 0.5, 1.5, -0.3)),
    _act("elu", F.elu, alpha=(1.0, 0.5, 2.0, 0.0)),
    _act("selu", F.selu),
    _act("celu", F.celu, alpha=(1.0, 0.5, 2.0)),
    Softplus,
    _act("hardswish", F.hardswish),
    _act("hardsigmoid", F.hardsigmoid),
    _act("hardtanh", F.hardtanh, min_val=(-1.0, -2.0, 0.0, -0.5), max_val=(1.0, 2.0, 6.0, 0.5)),
    _act("softsign", F.softsign),
    _act("tanhshrink", F.tanhshrink),
    _act("threshold", F.threshold, threshold=(0.0, 0.5, -1.0, 1.0), value=(0.0, -1.0, 2.0, 0.5)),
    _act("logsigmoid", F.logsigmoid),
    _act("hardshrink", F.hardshrink, lambd=(0.5, 0.0, 0.25, 1.0)),
    _act("softshrink", F.softshrink, lambd=(0.5, 0.0, 0.25, 1.0)),
    _softmax("softmax", F.softmax),
    _softmax("log_softmax", F.log_softmax),
    _softmax("softmin", F.softmin),
    Glu,
    Prelu,
])
