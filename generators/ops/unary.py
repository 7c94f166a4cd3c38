"""Elementwise unary operators, including the domain-restricted ones (log, sqrt, asin, ...)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import onnx
import torch

from generators.dtypes import ALL, FLOATS, INTS, SIGNED_INTS, DType
from generators.ops.base import (
    ANY_RANK,
    BOOL_PROMOTES_TO_INT,
    IDENTITY,
    INTS_PROMOTE,
    SAFE_EXP_ARG,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    call,
    clamp_penalty,
    excluded,
    function_source,
)
from generators.ops.discontinuity import BranchPoints, Detector, at_zero, rounding, to_integer
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC, OnnxCall, elementwise
from generators.ops.tf_sources import TF_ALL, TF_FLOATS, TF_NUMERIC, TF_SIGNED

TINY = 1e-3  # distance kept from a pole or a domain edge, so float16 rounding cannot cross it


@dataclass(frozen=True)
class Domain:
    """Open interval the op's input must stay inside (None = unbounded)."""

    lo: float | None = None
    hi: float | None = None
    avoid_zero: bool = False


class Unary(OpSpec):
    """An elementwise op: output has the input's shape, and its dtype unless the sig says otherwise (logical_not)."""

    family = "unary"
    ranks = (ANY_RANK,)
    fn: Callable[[torch.Tensor], torch.Tensor]
    domain: Domain = Domain()
    # The public dotted name of `fn` where `function_source` cannot find it (torch.special.erfc is special_erfc).
    source: ClassVar[str | None] = None
    # The ONNX operator computing `fn` (None: none does).
    onnx_op: ClassVar[str | None] = None

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        (sig,) = self.out_dtypes_for((x.dtype,))
        return Build([SymTensor(x.shape, sig.out)])

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(self.source or function_source(type(self).fn), args)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, self.onnx_op) if self.onnx_op else None

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        d = self.domain
        if d == Domain() or not x.is_floating_point():
            return None
        loss = clamp_penalty(x, d.lo, d.hi)
        if d.avoid_zero:
            loss = loss + torch.relu(TINY - x.float().abs()).sum()
        return loss


INF = float("inf")


def _unary(name: str, fn: Callable, dtypes=FLOATS, domain: Domain = Domain(), *,
           value_range: tuple[float, float] | None = None, emits_zeros: bool = False, keeps_zeros: bool = False,
           discontinuity: Detector | None = None, source: str | None = None, onnx: str | None = None,
           onnx_types: frozenset[DType] = ORT_FLOATS, onnx_since: int = 1, base: type[Unary] = Unary,
           exclusions: Mapping[DType, str] = INTS_PROMOTE, out: DType | None = None, tf: str | None = None,
           tf_types: frozenset[DType] = TF_FLOATS) -> type[Unary]:
    """One elementwise op. `value_range`: the interval its output always lies in, whatever the input (pi/2 is
    rounded up); `emits_zeros`: it maps a whole interval to 0 (no gradient leads out of it); `keeps_zeros`:
    f(0) == 0; `source`: the public name of `fn` where `function_source` cannot find it; `onnx`: the ONNX operator
    computing `fn` from `onnx_since`, which ONNX Runtime runs for `onnx_types` (`base` writes it otherwise);
    `exclusions`: the dtypes eager runs it for that `dtypes` leaves out, with why (OpSpec.dtype_exclusions); `out`:
    the output dtype where it is not the input's; `tf`: its TensorFlow source (OpSpec.tf_fn), which TensorFlow's CPU
    kernels run for `tf_types`."""
    # staticmethod: a detector that is a plain function (to_integer) must not bind to the op as a method.
    bounds = (-INF if domain.lo is None else domain.lo, INF if domain.hi is None else domain.hi)
    sigs = tuple(Sig((d,), out or d) for d in dtypes)
    return type(name, (base,), {"name": name, "fn": staticmethod(fn), "sigs": sigs, "dtype_exclusions": exclusions,
                                 "domain": domain, "value_range": value_range,
                                 "input_domain": (bounds if bounds != (-INF, INF) else None,),
                                 "nonzero_inputs": (0,) if domain.avoid_zero else (),
                                 "emits_zeros": emits_zeros, "keeps_zeros": keeps_zeros,
                                 "discontinuity": staticmethod(discontinuity), "source": source,
                                 "onnx_op": onnx, "onnx_since": onnx_since if onnx else None,
                                 "onnx_types": onnx_types, "tf_fn": tf, "tf_types": tf_types})


class Square(Unary):
    """x * x: its ONNX counterpart is Mul of the input with itself (ONNX has no Square)."""

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        (x,) = call.inputs
        call.node("Mul", [x, x], call.outputs)
        return call.nodes


class BitwiseNot(Unary):
    """~x: ONNX's BitwiseNot (opset 18) for integers, Not for bools (where ~ is logical)."""

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Not" if call.dtype is DType.BOOL else "BitwiseNot")


# ONNX Runtime's CPU kernels of Abs, Neg and Sign take the signed ints too; Tan, Asin, Erf, ... have no float64
# kernel.
ORT_SIGNED = ORT_FLOATS | {DType.INT32, DType.INT64, DType.INT8}
ORT_F32_F16 = frozenset({DType.FLOAT32, DType.FLOAT16})

INT_IDENTITY = excluded(INTS, IDENTITY)
UNSIGNED_NEGATION = "negation wraps modulo 256 on unsigned values, and ONNX's Neg takes signed types only"

# Half-precision exp overflows past ~11; float32 past ~88. One bound fits all dtypes.
EXP_DOMAIN = Domain(hi=SAFE_EXP_ARG)
OPS: list[type[OpSpec]] = [
    _unary("abs", torch.abs, FLOATS + SIGNED_INTS, value_range=(0, INF), keeps_zeros=True, onnx="Abs",
           onnx_types=ORT_SIGNED, exclusions=excluded((DType.UINT8,), IDENTITY), tf="tf.math.abs", tf_types=TF_SIGNED),
    _unary("neg", torch.neg, FLOATS + SIGNED_INTS, keeps_zeros=True, onnx="Neg", onnx_types=ORT_SIGNED,
           exclusions=excluded((DType.UINT8,), UNSIGNED_NEGATION), tf="tf.math.negative", tf_types=TF_SIGNED),
    _unary("exp", torch.exp, domain=EXP_DOMAIN, value_range=(0, INF), onnx="Exp", tf="tf.math.exp"),
    _unary("expm1", torch.expm1, domain=EXP_DOMAIN, value_range=(-1, INF), keeps_zeros=True, tf="tf.math.expm1"),
    _unary("exp2", torch.exp2, domain=Domain(hi=15.0), value_range=(0, INF),
           tf="tf.math.pow(tf.cast(2, {x}.dtype), {x})"),
    _unary("log", torch.log, domain=Domain(lo=TINY), discontinuity=BranchPoints((0.0,), signed_zero=True), onnx="Log",
           tf="tf.math.log"),
    _unary("log2", torch.log2, domain=Domain(lo=TINY), discontinuity=BranchPoints((0.0,), signed_zero=True),
           tf="tf.math.log({x}) / tf.math.log(tf.cast(2, {x}.dtype))"),
    _unary("log10", torch.log10, domain=Domain(lo=TINY), discontinuity=BranchPoints((0.0,), signed_zero=True),
           tf="tf.math.log({x}) / tf.math.log(tf.cast(10, {x}.dtype))"),
    _unary("log1p", torch.log1p, domain=Domain(lo=-1 + TINY), keeps_zeros=True,
           discontinuity=BranchPoints((-1.0,)), tf="tf.math.log1p"),
    _unary("sqrt", torch.sqrt, domain=Domain(lo=TINY), value_range=(0, INF), keeps_zeros=True,
           discontinuity=BranchPoints((0.0,)), onnx="Sqrt", tf="tf.math.sqrt"),
    _unary("rsqrt", torch.rsqrt, domain=Domain(lo=TINY), value_range=(0, INF),
           discontinuity=BranchPoints((0.0,), signed_zero=True), tf="tf.math.rsqrt"),
    _unary("reciprocal", torch.reciprocal, domain=Domain(avoid_zero=True),
           discontinuity=BranchPoints((0.0,), signed_zero=True), onnx="Reciprocal", tf="tf.math.reciprocal"),
    _unary("sin", torch.sin, value_range=(-1, 1), keeps_zeros=True, onnx="Sin", tf="tf.math.sin"),
    _unary("cos", torch.cos, value_range=(-1, 1), onnx="Cos", tf="tf.math.cos"),
    _unary("tan", torch.tan, domain=Domain(lo=-1.5, hi=1.5), keeps_zeros=True, onnx="Tan", onnx_types=ORT_F32_F16,
           tf="tf.math.tan"),
    _unary("asin", torch.asin, domain=Domain(lo=-1 + TINY, hi=1 - TINY), value_range=(-1.571, 1.571),
           keeps_zeros=True, discontinuity=BranchPoints((-1.0, 1.0)), onnx="Asin", onnx_types=ORT_F32_F16,
           tf="tf.math.asin"),
    _unary("acos", torch.acos, domain=Domain(lo=-1 + TINY, hi=1 - TINY), value_range=(0, 3.142),
           discontinuity=BranchPoints((-1.0, 1.0)), onnx="Acos", onnx_types=ORT_F32_F16, tf="tf.math.acos"),
    _unary("atan", torch.atan, value_range=(-1.571, 1.571), keeps_zeros=True, onnx="Atan", onnx_types=ORT_F32_F16,
           tf="tf.math.atan"),
    _unary("sinh", torch.sinh, domain=Domain(lo=-SAFE_EXP_ARG, hi=SAFE_EXP_ARG), keeps_zeros=True, onnx="Sinh",
           onnx_types=ORT_F32_F16, tf="tf.math.sinh"),
    _unary("cosh", torch.cosh, domain=Domain(lo=-SAFE_EXP_ARG, hi=SAFE_EXP_ARG), value_range=(1, INF), onnx="Cosh",
           onnx_types=ORT_F32_F16, tf="tf.math.cosh"),
    _unary("tanh", torch.tanh, value_range=(-1, 1), keeps_zeros=True, onnx="Tanh", tf="tf.math.tanh"),
    _unary("asinh", torch.asinh, keeps_zeros=True, onnx="Asinh", onnx_types=ORT_F32_F16, tf="tf.math.asinh"),
    _unary("acosh", torch.acosh, domain=Domain(lo=1 + TINY), value_range=(0, INF),
           discontinuity=BranchPoints((1.0,)), onnx="Acosh", onnx_types=ORT_F32_F16, tf="tf.math.acosh"),
    _unary("atanh", torch.atanh, domain=Domain(lo=-1 + TINY, hi=1 - TINY), keeps_zeros=True,
           discontinuity=BranchPoints((-1.0, 1.0)), onnx="Atanh", onnx_types=ORT_F32_F16, tf="tf.math.atanh"),
    _unary("erf", torch.erf, value_range=(-1, 1), keeps_zeros=True, onnx="Erf", onnx_types=ORT_F32_F16,
           tf="tf.math.erf"),
    _unary("erfc", torch.special.erfc, value_range=(0, 2), source="torch.special.erfc", tf="tf.math.erfc"),
    _unary("floor", torch.floor, emits_zeros=True, discontinuity=to_integer, onnx="Floor", exclusions=INT_IDENTITY,
           tf="tf.math.floor"),
    _unary("ceil", torch.ceil, emits_zeros=True, discontinuity=to_integer, onnx="Ceil", exclusions=INT_IDENTITY,
           tf="tf.math.ceil"),
    _unary("round", torch.round, emits_zeros=True, discontinuity=rounding, onnx="Round", exclusions=INT_IDENTITY,
           tf="tf.math.round"),
    _unary("trunc", torch.trunc, emits_zeros=True, discontinuity=to_integer, exclusions=INT_IDENTITY,
           tf="tf.where({x} < 0, tf.math.ceil({x}), tf.math.floor({x}))"),
    _unary("frac", torch.frac, value_range=(-1, 1), emits_zeros=True, discontinuity=to_integer, exclusions={},
           tf="{x} - tf.where({x} < 0, tf.math.ceil({x}), tf.math.floor({x}))"),
    _unary("sign", torch.sign, FLOATS + INTS, value_range=(-1, 1), emits_zeros=True,
           discontinuity=at_zero(), onnx="Sign", onnx_types=ORT_SIGNED, exclusions=excluded((DType.BOOL,), IDENTITY),
           tf="tf.math.sign", tf_types=TF_SIGNED),
    _unary("square", torch.square, FLOATS + INTS, domain=Domain(lo=-200.0, hi=200.0), value_range=(0, INF),
           keeps_zeros=True, onnx="Mul", onnx_types=ORT_NUMERIC, base=Square,
           exclusions=excluded((DType.BOOL,), BOOL_PROMOTES_TO_INT), tf="tf.math.square", tf_types=TF_NUMERIC),
    _unary("sigmoid", torch.sigmoid, value_range=(0, 1), onnx="Sigmoid", tf="tf.math.sigmoid"),
    _unary("logit", torch.logit, domain=Domain(lo=TINY, hi=1 - TINY), discontinuity=BranchPoints((0.0, 1.0)),
           tf="tf.math.log({x} / (tf.cast(1, {x}.dtype) - {x}))"),
    _unary("bitwise_not", torch.bitwise_not, INTS + (DType.BOOL,), onnx="BitwiseNot", onnx_since=18,
           onnx_types=frozenset(INTS + (DType.BOOL,)), base=BitwiseNot, exclusions={},
           tf="tf.bitwise.invert", tf_types=TF_NUMERIC - TF_FLOATS),
    # Any dtype is x == 0; ONNX's Not takes bools only.
    _unary("logical_not", torch.logical_not, ALL, discontinuity=at_zero(), out=DType.BOOL, onnx="Not",
           onnx_types=frozenset({DType.BOOL}), exclusions={},
           tf="tf.math.logical_not(tf.cast({x}, tf.bool))", tf_types=TF_ALL),
]
