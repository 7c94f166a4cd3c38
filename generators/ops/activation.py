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
    call,
    function_source,
    pick_axis,
    same_sigs,
)
from generators.ops.discontinuity import Detector, Thresholds, at_zero

INF = float("inf")


class Activation(OpSpec):
    """Elementwise `fn(x, **attrs)`; each attribute is picked from `choices` (first option = PyTorch default)."""

    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    choices: ClassVar[Mapping[str, Sequence[Any]]] = {}
    fn: Callable[..., torch.Tensor]
    # The public dotted name of `fn` where `function_source` cannot find it (F.threshold is `_threshold`).
    source: ClassVar[str | None] = None

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        attrs = {k: ctx.choice(k, options) for k, options in self.choices.items()}
        return Build([SymTensor(x.shape, x.dtype)], attrs=attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, **attrs)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(self.source or function_source(type(self).fn), args, **attrs)


def _act(name: str, fn: Callable, dtypes=FLOATS, *, source: str | None = None,
         discontinuity: Detector | None = None, value_range: tuple[float, float] | None = None,
         emits_zeros: bool = False, float32_attrs: tuple[str, ...] = (), **choices: Sequence[Any]) -> type[Activation]:
    """One activation. `value_range`: the interval its output always lies in, whatever the input (used to avoid
    infeasible graphs); `emits_zeros`: it maps a whole interval to exactly 0; `float32_attrs`: its attributes that
    ONNX stores as float attributes (OpSpec.float32_attrs)."""
    # staticmethod: a detector that is a plain function must not bind to the op as a method.
    body = {"name": name, "fn": staticmethod(fn), "sigs": same_sigs(dtypes), "choices": choices, "source": source,
            "discontinuity": staticmethod(discontinuity), "value_range": value_range, "emits_zeros": emits_zeros,
            "float32_attrs": float32_attrs}
    return type(name, (Activation,), body)


class Softplus(Activation):
    """exp(beta * x) is evaluated below the threshold: keep it finite even in float16."""

    name = "softplus"
    fn = staticmethod(F.softplus)
    value_range = (0, INF)
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

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args, dim=attrs["dim"])


def _softmax(name: str, fn: Callable, value_range: tuple[float, float]) -> type[SoftmaxLike]:
    return type(name, (SoftmaxLike,), {"name": name, "fn": staticmethod(fn), "value_range": value_range})


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

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.glu", args, dim=attrs["dim"])


class Prelu(OpSpec):
    """F.prelu with a weight of 1 or C (= dim 1 of the input) slopes."""

    name = "prelu"
    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    discontinuity = at_zero()

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        weight = ctx.weight(1, x.dtype)
        per_channel = x.rank >= 2 and ctx.choice("per_channel", (False, True))
        channels = x.shape[1] if per_channel else 1
        return Build([SymTensor(x.shape, x.dtype)], [weight.shape[0] == channels])

    def forward(self, attrs: AttrMap, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.prelu(x, weight)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.prelu", args)


# hardsigmoid/hardswish switch branch at -3 and 3; hardshrink/softshrink at +-lambd.
HARD_KNEES = Thresholds(((None, -3.0), (None, 3.0)))
SHRINK_KNEES = Thresholds((("lambd", 0.5), ("-lambd", 0.5)))
OPS: list[type[OpSpec]] = [
    _act("relu", F.relu, FLOATS + INTS, value_range=(0, INF), emits_zeros=True, discontinuity=at_zero()),
    _act("relu6", F.relu6, FLOATS + INTS, value_range=(0, 6), emits_zeros=True,
         discontinuity=Thresholds(((None, 0.0), (None, 6.0)))),
    _act("gelu", F.gelu, value_range=(-0.171, INF), approximate=("none", "tanh")),
    _act("silu", F.silu, value_range=(-0.279, INF)),
    _act("mish", F.mish, value_range=(-0.309, INF)),
    _act("leaky_relu", F.leaky_relu, discontinuity=at_zero(), float32_attrs=("negative_slope",),
         negative_slope=(0.01, 0.0, 0.1, 0.2, 0.5, 1.5, -0.3)),
    _act("elu", F.elu, float32_attrs=("alpha",), alpha=(1.0, 0.5, 2.0, 0.0)),
    _act("selu", F.selu),
    _act("celu", F.celu, float32_attrs=("alpha",), alpha=(1.0, 0.5, 2.0)),
    Softplus,
    _act("hardswish", F.hardswish, value_range=(-0.375, INF), emits_zeros=True, discontinuity=HARD_KNEES),
    _act("hardsigmoid", F.hardsigmoid, value_range=(0, 1), emits_zeros=True, discontinuity=HARD_KNEES),
    _act("hardtanh", F.hardtanh, discontinuity=Thresholds((("min_val", -1.0), ("max_val", 1.0))),
         min_val=(-1.0, -2.0, 0.0, -0.5), max_val=(1.0, 2.0, 6.0, 0.5)),
    _act("softsign", F.softsign, value_range=(-1, 1)),
    _act("tanhshrink", F.tanhshrink),
    _act("threshold", F.threshold, emits_zeros=True, source="torch.nn.functional.threshold",
         discontinuity=Thresholds((("threshold", None),)),
         threshold=(0.0, 0.5, -1.0, 1.0), value=(0.0, -1.0, 2.0, 0.5)),
    _act("logsigmoid", F.logsigmoid, value_range=(-INF, 0), source="torch.nn.functional.logsigmoid"),
    _act("hardshrink", F.hardshrink, emits_zeros=True, source="torch.nn.functional.hardshrink",
         discontinuity=SHRINK_KNEES, lambd=(0.5, 0.0, 0.25, 1.0)),
    _act("softshrink", F.softshrink, emits_zeros=True, discontinuity=SHRINK_KNEES, lambd=(0.5, 0.0, 0.25, 1.0)),
    _softmax("softmax", F.softmax, (0, 1)),
    _softmax("log_softmax", F.log_softmax, (-INF, 0)),
    _softmax("softmin", F.softmin, (0, 1)),
    Glu,
    Prelu,
]
