"""Fusion patterns of ONNX Runtime's CPU transformers at levels extended and all: the GELU spellings (tanh, with a
bias), Add then LayerNormalization, a depthwise Conv with a residual Add and activation, a Relu that a
quantization makes redundant.

Like generators/ops/patterns.py, each operator is one subgraph: `forward` is what a model author writes, and the
counterpart is the multi-node ONNX pattern as the transformer matches it. Each transformer's conditions (dtypes,
ranks, shapes, which node may write a graph output) are read off its source and tried on the installed runtime;
tests/test_onnx_patterns.py checks each declared rewrite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS, DType
from generators.ops.base import (
    INTS_PROMOTE,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    call,
    conv_out,
    functional_source,
    literal,
    same_sigs,
)
from generators.ops.discontinuity import Closeness, Labels, rounding
from generators.ops.onnx_nodes import OnnxCall
from generators.ops.patterns import EPS, MAX_KERNEL, ORT_CONV, SQRT2, Pattern, Rewrite

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715
# The dtypes whose decomposed normalization stays within the one-op tolerance from torch (see DecomposedLayerNorm).
NORM_TYPES = frozenset({DType.FLOAT32, DType.FLOAT64})


class TanhGelu(Pattern):
    """GELU's tanh approximation written out as GPT-2 does, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
    or with x * (1 + 0.044715 * x * x) inside, then the MLP's projection (MatMul by a weight): FastGelu, MatMul.
    (FastGeluFusion leaves the subgraph alone where its last Mul writes a graph output, hence the projection.)"""

    name = "pattern_tanh_gelu"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    onnx_since = 9
    onnx_types = NORM_TYPES  # FastGelu's CPU kernel takes float32; float64 keeps the unfused subgraph
    rewrites = (Rewrite("ort", "extended", ("FastGelu", "MatMul"), "FastGeluFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        w = ctx.weight(2, x.dtype)
        attrs = {"cubic": ctx.choice("cubic", ("pow", "square"))}
        return Build([SymTensor(x.shape[:-1] + (w.shape[1],), x.dtype)], [w.shape[0] == x.shape[-1]], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if attrs["cubic"] == "pow":
            gelu = 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * torch.pow(x, 3.0))))
        else:
            gelu = 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_CUBIC * x * x)))
        return torch.matmul(gelu, w)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w = args
        if attrs["cubic"] == "pow":
            inner = f"{SQRT_2_OVER_PI!r} * ({x} + {GELU_CUBIC!r} * torch.pow({x}, 3.0))"
        else:
            inner = f"{SQRT_2_OVER_PI!r} * {x} * (1.0 + {GELU_CUBIC!r} * {x} * {x})"
        return f"torch.matmul(0.5 * {x} * (1.0 + torch.tanh({inner})), {w})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        (x, w), dtype = call.inputs, call.dtype
        if attrs["cubic"] == "pow":
            cube = call.node("Pow", [x, call.const(3.0, dtype)])
            inner = call.node("Add", [x, call.node("Mul", [call.const(GELU_CUBIC, dtype), cube])])
            scaled = call.node("Mul", [call.const(SQRT_2_OVER_PI, dtype), inner])
        else:
            square = call.node("Mul", [call.node("Mul", [call.const(GELU_CUBIC, dtype), x]), x])
            inner = call.node("Add", [call.const(1.0, dtype), square])
            scaled = call.node("Mul", [call.node("Mul", [call.const(SQRT_2_OVER_PI, dtype), x]), inner])
        one_plus = call.node("Add", [call.const(1.0, dtype), call.node("Tanh", [scaled])])
        gelu = call.node("Mul", [call.node("Mul", [call.const(0.5, dtype), x]), one_plus])
        call.node("MatMul", [gelu, w], call.outputs)
        return call.nodes


class BiasGelu(Pattern):
    """Add of a bias along the last dim, then GELU written out, x * 0.5 * (1 + erf(x / sqrt(2))), the half taken
    first or last: GeluFusion, then BiasGeluFusion, make one BiasGelu."""

    name = "pattern_bias_gelu"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = INTS_PROMOTE
    onnx_since = 9
    onnx_types = ORT_CONV  # Erf's kernels
    rewrites = (Rewrite("ort", "extended", ("BiasGelu",), "BiasGeluFusion"),
                Rewrite("ort", "extended", ("BiasGelu",), "GeluFusionL2"))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        reqs = [ctx.weight(1, x.dtype).shape[0] == x.shape[-1]]
        return Build([SymTensor(x.shape, x.dtype)], reqs, {"half_first": ctx.choice("half_first", (True, False))})

    def forward(self, attrs: AttrMap, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = x + b
        if attrs["half_first"]:
            return y * 0.5 * (1.0 + torch.erf(y / SQRT2))
        return y * (1.0 + torch.erf(y / SQRT2)) * 0.5

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        y = f"({args[0]} + {args[1]})"
        erf = f"(1.0 + torch.erf({y} / {SQRT2!r}))"
        return f"{y} * 0.5 * {erf}" if attrs["half_first"] else f"{y} * {erf} * 0.5"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        dtype = call.dtype
        y = call.node("Add", call.inputs)
        erf = call.node("Erf", [call.node("Div", [y, call.const(SQRT2, dtype)])])
        one_plus = call.node("Add", [erf, call.const(1.0, dtype)])
        if attrs["half_first"]:
            call.node("Mul", [call.node("Mul", [y, call.const(0.5, dtype)]), one_plus], call.outputs)
        else:
            call.node("Mul", [call.node("Mul", [y, one_plus]), call.const(0.5, dtype)], call.outputs)
        return call.nodes


class SkipLayerNorm(Pattern):
    """Add of a residual (and optionally first of a bias along the last dim), then layer normalization over the
    last dim, of 3-D tensors of one shape: SkipLayerNormalization. (LayerNormalization from opset 17, written out
    before it: LayerNormFusion makes it first.)"""

    name = "pattern_skip_layer_norm"
    ranks = ((3,), (3,))  # the fusion takes [batch, sequence, hidden] and no broadcasting
    sigs = same_sigs(FLOATS, 2)
    float32_attrs = ("eps",)
    onnx_since = 13
    onnx_types = NORM_TYPES  # SkipLayerNormalization's CPU kernel takes float32: float64 stays unfused
    rewrites = (Rewrite("ort", "extended", ("SkipLayerNormalization",), "SkipLayerNormFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor, skip: SymTensor) -> Build:
        bias = ctx.choice("bias", (True, False))
        reqs = [a == b for a, b in zip(x.shape, skip.shape)]
        reqs += [ctx.weight(1, x.dtype).shape[0] == x.shape[-1] for _ in range(3 if bias else 2)]
        attrs = {"bias": bias, "eps": ctx.choice("eps", EPS + (1e-12,)), "axis": ctx.choice("axis", (-1, 2))}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, skip: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        scale, shift, *bias = ws
        y = (x + bias[0] if bias else x) + skip
        return F.layer_norm(y, (y.shape[-1],), scale, shift, eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, skip, scale, shift, *bias = args
        y = f"({x} + {bias[0]} + {skip})" if bias else f"({x} + {skip})"
        return call(functional_source(F.layer_norm), [y, f"({y}.shape[-1],)", scale, shift], eps=attrs["eps"])

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, skip, scale, shift, *bias = call.inputs
        y = call.node("Add", [call.node("Add", [x, bias[0]]) if bias else x, skip])
        eps, axis = float(attrs["eps"]), attrs["axis"]
        if call.opset >= 17:
            call.node("LayerNormalization", [y, scale, shift], call.outputs, axis=axis, epsilon=eps)
            return call.nodes
        centred = call.node("Sub", [y, call.reduce("ReduceMean", y, [axis], keepdims=True)])
        var = call.reduce("ReduceMean", call.node("Pow", [centred, call.const(2.0, call.dtype)]), [axis], True)
        std = call.node("Sqrt", [call.node("Add", [var, call.const(eps, call.dtype)])])
        normed = call.node("Mul", [call.node("Div", [centred, std]), scale])
        call.node("Add", [normed, shift], call.outputs)
        return call.nodes


# The activations FusedConv takes after its residual Add (ConvAddActivationFusion), "none" for the Add alone.
RESIDUAL_ACTIVATIONS = ("none", "relu", "sigmoid", "tanh", "leaky_relu", "clip")


class DepthwiseConvResidual(Pattern):
    """A depthwise Conv with a bias, Add of a residual of its output's shape, then an activation (or none): one
    FusedConv taking the residual (ONNX Runtime's ConvAddActivationFusion, level all)."""

    name = "pattern_depthwise_conv_residual"
    onnx_core = "Conv"
    ranks = ((4,), (4,))
    sigs = same_sigs(FLOATS, 2)
    emits_zeros = True
    onnx_since = 11
    onnx_types = ORT_CONV
    rewrites = (Rewrite("ort", "all", ("FusedConv",), "ConvAddActivationFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor, residual: SymTensor) -> Build:
        n, c, h, w_ = x.shape
        w, b = ctx.weight(4, x.dtype), ctx.weight(1, x.dtype)
        kh, kw = w.shape[2], w.shape[3]
        padding = (ctx.int_attr("padding0", 0, 1), ctx.int_attr("padding1", 0, 1))
        out = (n, c, conv_out(h, kh, 1, padding[0]), conv_out(w_, kw, 1, padding[1]))
        # The NCHWc layout transformer (level all, x86-64) takes a Conv of one group, or of channels that fill
        # its blocks, before this fusion sees it.
        reqs = [w.shape[0] == c, w.shape[1] == 1, b.shape[0] == c, c >= 2, c % 4 != 0, kh <= MAX_KERNEL,
                kw <= MAX_KERNEL, h + 2 * padding[0] >= kh, w_ + 2 * padding[1] >= kw]
        reqs += [a == b for a, b in zip(residual.shape, out)]
        attrs = {"padding": padding, "activation": ctx.choice("activation", RESIDUAL_ACTIVATIONS),
                 "alpha": ctx.choice("alpha", (0.01, 0.2))}
        return Build([SymTensor(out, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
                b: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, w, b, padding=attrs["padding"], groups=x.shape[1]) + residual
        act = attrs["activation"]
        if act == "relu":
            return F.relu(y)
        if act == "leaky_relu":
            return F.leaky_relu(y, attrs["alpha"])
        if act == "clip":
            return torch.clamp(y, 0.0, 6.0)
        return y if act == "none" else getattr(torch, act)(y)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, residual, w, b = args
        conv = f"{functional_source(F.conv2d)}({x}, {w}, {b}, padding={literal(attrs['padding'])}, groups={x}.shape[1])"
        y = f"({conv} + {residual})"
        act = attrs["activation"]
        if act == "relu":
            return call(functional_source(F.relu), [y])
        if act == "leaky_relu":
            return call(functional_source(F.leaky_relu), [y], attrs["alpha"])
        if act == "clip":
            return call("torch.clamp", [y], 0.0, 6.0)
        return y if act == "none" else call(f"torch.{act}", [y])

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, residual, w, b = call.inputs
        channels, kernel = call.in_types[0].shape[1], list(call.in_types[2].shape[2:])
        conv = call.node("Conv", [x, w, b], kernel_shape=kernel, strides=[1, 1], pads=list(attrs["padding"]) * 2,
                         dilations=[1, 1], group=channels)
        act = attrs["activation"]
        if act == "none":
            call.node("Add", [conv, residual], call.outputs)
            return call.nodes
        y = call.node("Add", [conv, residual])
        if act == "clip":
            call.clip(y, 0.0, 6.0, call.dtype, out=call.outputs[0])
        elif act == "leaky_relu":
            call.node("LeakyRelu", [y], call.outputs, alpha=float(attrs["alpha"]))
        else:
            call.node({"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}[act], [y], call.outputs)
        return call.nodes


# Powers of two: torch's fake quantization multiplies by the inverse scale where QuantizeLinear divides by the scale,
# and only then do the two agree on every value.
QUANT_SCALES = (0.125, 0.015625)
# The quantized type's zero point at its lowest value, which ReluQuantFusion asks: (signed, zero point, low, high).
QUANT_RANGES = ((False, 0, 0, 255), (True, -128, -128, 127))


def quantization_tie(inputs: Sequence[np.ndarray], attrs: AttrMap, near: Closeness) -> Labels:
    """Quantization rounds x / scale half to even: a tie is a fractional part of .5."""
    return rounding([np.asarray(inputs[0], dtype=np.float64) / attrs.get("scale", 1.0)], {}, near)


class ReluFakeQuant(Pattern):
    """Relu, then fake quantization to uint8 or int8 with the zero point at the type's lowest value
    (QuantizeLinear, DequantizeLinear): the quantization clamps at zero too, so ONNX Runtime's level-2 rule
    ReluQuantFusion drops the Relu."""

    name = "pattern_relu_fake_quant"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    emits_zeros = True
    discontinuity = staticmethod(quantization_tie)  # a plain function: it must not bind to the op
    onnx_since = 13
    onnx_types = frozenset({DType.FLOAT32})  # QuantizeLinear's input at every opset from 13
    rewrites = (Rewrite("ort", "extended", ("QuantizeLinear", "DequantizeLinear"), "Level2_RuleBasedTransformer"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        attrs = {"signed": ctx.choice("signed", (False, True)), "scale": ctx.choice("scale", QUANT_SCALES)}
        return Build([SymTensor(x.shape, x.dtype)], [], attrs)

    @staticmethod
    def quant_range(attrs: AttrMap) -> tuple[int, int, int]:
        """The zero point and the quantized type's bounds."""
        return next(r[1:] for r in QUANT_RANGES if r[0] == attrs["signed"])

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.fake_quantize_per_tensor_affine(F.relu(x), attrs["scale"], *self.quant_range(attrs))

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        relu = call(functional_source(F.relu), args)
        return call("torch.fake_quantize_per_tensor_affine", [relu], attrs["scale"], *self.quant_range(attrs))

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        zero_point = self.quant_range(attrs)[0]
        scale = call.const(attrs["scale"], call.dtype)
        zero = call.const(zero_point, DType.INT8 if attrs["signed"] else DType.UINT8)
        quantized = call.node("QuantizeLinear", [call.node("Relu", call.inputs), scale, zero])
        call.node("DequantizeLinear", [quantized, scale, zero], call.outputs)
        return call.nodes


OPS: list[type[OpSpec]] = [TanhGelu, BiasGelu, SkipLayerNorm, DepthwiseConvResidual, ReluFakeQuant]
