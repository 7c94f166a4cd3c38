"""Elementwise unary operators, including the domain-restricted ones (log, sqrt, asin, ...)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from generators.dtypes import FLOATS, INTS, SIGNED_INTS, DType
from generators.ops.base import (
    ANY_RANK,
    SAFE_EXP_ARG,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    clamp_penalty,
)

TINY = 1e-3  # distance kept from a pole or a domain edge, so float16 rounding cannot cross it


@dataclass(frozen=True)
class Domain:
    """Open interval the op's input must stay inside (None = unbounded)."""

    lo: float | None = None
    hi: float | None = None
    avoid_zero: bool = False


class Unary(OpSpec):
    """An elementwise op: output has the input's shape and dtype."""

    family = "unary"
    ranks = (ANY_RANK,)
    fn: Callable[[torch.Tensor], torch.Tensor]
    domain: Domain = Domain()

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, x.dtype)])

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x)

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        d = self.domain
        if d == Domain() or not x.is_floating_point():
            return None
        loss = clamp_penalty(x, d.lo, d.hi)
        if d.avoid_zero:
            loss = loss + torch.relu(TINY - x.float().abs()).sum()
        return loss


INF = float("inf")
# Value ranges of the ops whose output is bounded, whatever the input (pi/2 rounded up).
RANGES: dict[str, tuple[float, float]] = {
    "exp": (0, INF), "expm1": (-1, INF), "exp2": (0, INF), "sqrt": (0, INF), "rsqrt": (0, INF),
    "sin": (-1, 1), "cos": (-1, 1), "tanh": (-1, 1), "sigmoid": (0, 1), "erf": (-1, 1), "erfc": (0, 2),
    "atan": (-1.571, 1.571), "asin": (-1.571, 1.571), "acos": (0, 3.142), "cosh": (1, INF), "abs": (0, INF),
    "square": (0, INF), "acosh": (0, INF), "sign": (-1, 1), "frac": (-1, 1),
}


# Ops that map a whole interval to 0 (no gradient leads out of it).
ZERO_EMITTERS = frozenset({"floor", "ceil", "round", "trunc", "frac", "sign"})
# Ops with f(0) == 0: a zero in gives a zero out.
ZERO_KEEPERS = frozenset({"abs", "neg", "square", "sqrt", "sin", "tan", "tanh", "atan", "asin", "asinh", "atanh",
                          "erf", "sinh", "expm1", "log1p"})


def _unary(name: str, fn: Callable, dtypes=FLOATS, domain: Domain = Domain()) -> type[Unary]:
    bounds = (-INF if domain.lo is None else domain.lo, INF if domain.hi is None else domain.hi)
    return type(name, (Unary,), {"name": name, "fn": staticmethod(fn), "sigs": tuple(Sig((d,), d) for d in dtypes),
                                 "domain": domain, "value_range": RANGES.get(name),
                                 "input_domain": (bounds if bounds != (-INF, INF) else None,),
                                 "nonzero_inputs": (0,) if domain.avoid_zero else (),
                                 "emits_zeros": name in ZERO_EMITTERS, "keeps_zeros": name in ZERO_KEEPERS})


# Half-precision exp overflows past ~11; float32 past ~88. One bound fits all dtypes.
EXP_DOMAIN = Domain(hi=SAFE_EXP_ARG)
OPS: list[type[OpSpec]] = [
    _unary("abs", torch.abs, FLOATS + SIGNED_INTS),
    _unary("neg", torch.neg, FLOATS + SIGNED_INTS),
    _unary("exp", torch.exp, domain=EXP_DOMAIN),
    _unary("expm1", torch.expm1, domain=EXP_DOMAIN),
    _unary("exp2", torch.exp2, domain=Domain(hi=15.0)),
    _unary("log", torch.log, domain=Domain(lo=TINY)),
    _unary("log2", torch.log2, domain=Domain(lo=TINY)),
    _unary("log10", torch.log10, domain=Domain(lo=TINY)),
    _unary("log1p", torch.log1p, domain=Domain(lo=-1 + TINY)),
    _unary("sqrt", torch.sqrt, domain=Domain(lo=TINY)),
    _unary("rsqrt", torch.rsqrt, domain=Domain(lo=TINY)),
    _unary("reciprocal", torch.reciprocal, domain=Domain(avoid_zero=True)),
    _unary("sin", torch.sin),
    _unary("cos", torch.cos),
    _unary("tan", torch.tan, domain=Domain(lo=-1.5, hi=1.5)),
    _unary("asin", torch.asin, domain=Domain(lo=-1 + TINY, hi=1 - TINY)),
    _unary("acos", torch.acos, domain=Domain(lo=-1 + TINY, hi=1 - TINY)),
    _unary("atan", torch.atan),
    _unary("sinh", torch.sinh, domain=Domain(lo=-SAFE_EXP_ARG, hi=SAFE_EXP_ARG)),
    _unary("cosh", torch.cosh, domain=Domain(lo=-SAFE_EXP_ARG, hi=SAFE_EXP_ARG)),
    _unary("tanh", torch.tanh),
    _unary("asinh", torch.asinh),
    _unary("acosh", torch.acosh, domain=Domain(lo=1 + TINY)),
    _unary("atanh", torch.atanh, domain=Domain(lo=-1 + TINY, hi=1 - TINY)),
    _unary("erf", torch.erf),
    _unary("erfc", torch.special.erfc),
    _unary("floor", torch.floor),
    _unary("ceil", torch.ceil),
    _unary("round", torch.round),
    _unary("trunc", torch.trunc),
    _unary("frac", torch.frac),
    _unary("sign", torch.sign, FLOATS + SIGNED_INTS),
    _unary("square", torch.square, FLOATS + INTS, domain=Domain(lo=-200.0, hi=200.0)),
    _unary("sigmoid", torch.sigmoid),
    _unary("logit", torch.logit, domain=Domain(lo=TINY, hi=1 - TINY)),
    _unary("bitwise_not", torch.bitwise_not, INTS + (DType.BOOL,)),
    _unary("logical_not", torch.logical_not, (DType.BOOL,)),
]
