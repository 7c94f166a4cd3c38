"""Special elementwise functions: log-sum-exp of two tensors, x * log(y), the step function, sinc, angle
conversions and nan_to_num."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import ClassVar

import onnx
import torch

from generators.dtypes import ALL, FLOATS, INTS, DType
from generators.ops.base import (
    ANY_RANK,
    IDENTITY,
    INTS_PROMOTE,
    AttrMap,
    BroadcastBinary,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    call,
    clamp_penalty,
    excluded,
    same_sigs,
)
from generators.ops.discontinuity import at_zero
from generators.ops.onnx_nodes import ORT_FLOATS, OnnxCall
from generators.ops.tf_sources import TF_NUMERIC
from generators.ops.unary import TINY, Unary


class SpecialBinary(BroadcastBinary):
    """A special function of two broadcast inputs of one float dtype; integers promote to float."""

    family = "special"
    sigs = same_sigs(FLOATS, 2)
    dtype_exclusions = INTS_PROMOTE


class LogAddExp(SpecialBinary):
    """log(exp(a) + exp(b)), computed without overflow."""

    name = "logaddexp"
    tf_fn = "tf.math.maximum({x}, {y}) + tf.math.log1p(tf.math.exp(-tf.math.abs({x} - {y})))"
    fn = staticmethod(torch.logaddexp)
    dtype_exclusions = MappingProxyType({})  # no integer kernel


class LogAddExp2(SpecialBinary):
    """log2(2**a + 2**b)."""

    name = "logaddexp2"
    tf_fn = ("tf.math.maximum({x}, {y})"
             " + tf.math.log1p(tf.math.pow(tf.cast(2, {x}.dtype), -tf.math.abs({x} - {y}))) / 0.6931471805599453")
    fn = staticmethod(torch.logaddexp2)
    dtype_exclusions = MappingProxyType({})


class XLogY(SpecialBinary):
    """x * log(y), 0 where x is 0: y must stay positive (log's pole at 0, NaN below)."""

    name = "xlogy"
    tf_fn = "tf.where(tf.math.is_nan({y}), {y}, tf.math.xlogy({x}, {y}))"
    fn = staticmethod(torch.xlogy)
    input_domain = (None, (TINY, float("inf")))

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        return clamp_penalty(y, lo=TINY)


class Heaviside(SpecialBinary):
    """The step function: 0 below 0, 1 above, `values` at exactly 0 (integers and bools too)."""

    name = "heaviside"
    tf_fn = "tf.where(tf.math.equal({x}, 0), {y}, tf.cast({x} > 0, {x}.dtype))"
    tf_types = TF_NUMERIC
    fn = staticmethod(torch.heaviside)
    sigs = same_sigs(ALL, 2)
    dtype_exclusions = MappingProxyType({})
    emits_zeros = True
    discontinuity = at_zero()


class Sinc(Unary):
    """sin(pi x) / (pi x), 1 at 0."""

    name = "sinc"
    tf_fn = ("tf.where(tf.math.equal({x}, 0), tf.ones_like({x}),"
             " tf.math.sin(3.141592653589793 * {x}) / (3.141592653589793 * {x}))")
    family = "special"
    fn = staticmethod(torch.sinc)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = INTS_PROMOTE
    value_range = (-0.218, 1.0)


class AngleConversion(Unary):
    """x times a constant (pi / 180 or its inverse): ONNX's counterpart is Mul by that constant."""

    family = "special"
    sigs = same_sigs(FLOATS)
    dtype_exclusions = INTS_PROMOTE
    keeps_zeros = True
    factor: ClassVar[float]
    onnx_since = 1
    onnx_types = ORT_FLOATS

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.node("Mul", [call.inputs[0], call.const(self.factor, call.dtype)], call.outputs)
        return call.nodes


class Deg2Rad(AngleConversion):
    name = "deg2rad"
    tf_fn = "{x} * (3.141592653589793 / 180)"
    fn = staticmethod(torch.deg2rad)
    factor = math.pi / 180.0


class Rad2Deg(AngleConversion):
    name = "rad2deg"
    tf_fn = "{x} * (180 / 3.141592653589793)"
    fn = staticmethod(torch.rad2deg)
    factor = 180.0 / math.pi


class NanToNum(OpSpec):
    """torch.nan_to_num with varied replacements (None: torch's default, the dtype's largest finite values)."""

    name = "nan_to_num"
    family = "special"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = excluded((*INTS, DType.BOOL), IDENTITY)
    keeps_zeros = True

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, x.dtype)], [], {
            "nan": ctx.choice("nan", (0.0, 1.0, -2.5)),
            "posinf": ctx.choice("posinf", (None, 100.0, 1.0)),
            "neginf": ctx.choice("neginf", (None, -100.0, -1.0)),
        })

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.nan_to_num(x, nan=attrs["nan"], posinf=attrs["posinf"], neginf=attrs["neginf"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nan_to_num", args, nan=attrs["nan"], posinf=attrs["posinf"], neginf=attrs["neginf"])


OPS: list[type[OpSpec]] = [LogAddExp, LogAddExp2, XLogY, Heaviside, Sinc, Deg2Rad, Rad2Deg, NanToNum]
