"""More fusion patterns of ONNX Runtime's CPU transformers: RMS normalization written out, YOLOv5's Focus slicing,
and a batched projection's bias Add in front of a residual layer normalization.

Like generators/ops/fusions.py, each operator is one subgraph: `forward` is what a model author writes, and the
counterpart is the multi-node ONNX pattern as the transformer matches it. Each transformer's conditions were tried
on the installed runtime (onnxruntime 1.32); tests/test_onnx_patterns.py checks each declared rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS, INTS, DType
from generators.ops.base import (
    INTS_PROMOTE,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    call,
    excluded,
    functional_source,
    same_sigs,
)
from generators.ops.fusions import NORM_TYPES
from generators.ops.onnx_nodes import ORT_FLOATS, OnnxCall
from generators.ops.patterns import EPS, Pattern, Rewrite

# Slice's "to the end" as the exporters write it.
INT64_MAX = 2**63 - 1
FOCUS_INTS = excluded((*INTS, DType.BOOL), "SliceConcatToSpaceToDepthFusion takes float and double only: an integer "
                      "Focus stays four Slices and a Concat, which the slicing operators draw already")


class RmsNorm(Pattern):
    """RMS normalization over the last dim written out as LLaMA and T5 do, x / sqrt(mean(x^2) + eps) * scale (x^2
    as Pow): SimplifiedLayerNormalization. (The fusion takes Pow, not Mul(x, x), and Div, not Reciprocal then Mul;
    its CPU kernel takes float32, so float64 keeps the unfused subgraph.)"""

    name = "pattern_rms_norm"
    # 1-D included: onnxruntime 1.32's fusion of a 1-D x with the scale as Mul's first input leaves a model that
    # fails to load (its Mul input is "not a graph input"), a bug for campaigns to file.
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = INTS_PROMOTE
    float32_attrs = ("eps",)
    onnx_since = 13
    onnx_types = NORM_TYPES
    rewrites = (Rewrite("ort", "extended", ("SimplifiedLayerNormalization",), "SimplifiedLayerNormFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        reqs = [ctx.weight(1, x.dtype).shape[0] == x.shape[-1]]
        attrs = {"eps": ctx.choice("eps", EPS), "scale_first": ctx.choice("scale_first", (False, True))}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        normed = x / torch.sqrt(torch.mean(torch.pow(x, 2.0), -1, keepdim=True) + attrs["eps"])
        return scale * normed if attrs["scale_first"] else normed * scale

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, scale = args
        normed = f"({x} / torch.sqrt(torch.mean(torch.pow({x}, 2.0), -1, keepdim=True) + {attrs['eps']!r}))"
        return f"{scale} * {normed}" if attrs["scale_first"] else f"{normed} * {scale}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        (x, scale), dtype = call.inputs, call.dtype
        mean = call.reduce("ReduceMean", call.node("Pow", [x, call.const(2.0, dtype)]), [-1], keepdims=True)
        std = call.node("Sqrt", [call.node("Add", [mean, call.const(float(attrs["eps"]), dtype)])])
        normed = call.node("Div", [x, std])
        call.node("Mul", [scale, normed] if attrs["scale_first"] else [normed, scale], call.outputs)
        return call.nodes


# The orders of the four (row, column) offsets the Focus concatenates: YOLOv5's first. SpaceToDepth's own order,
# (0, 0), (0, 1), (1, 0), (1, 1), leaves no Gather, so the fused node types would differ by order.
# Each as its row and column offsets, one digit each (an attribute is a string, saved with the graph as it is).
FOCUS_ORDERS = ("00 10 01 11", "11 00 10 01", "01 11 10 00")


def focus_offsets(order: str) -> list[tuple[int, int]]:
    """The (row, column) offsets of an order in FOCUS_ORDERS."""
    return [(int(piece[0]), int(piece[1])) for piece in order.split()]


class SpaceToDepthFocus(Pattern):
    """YOLOv5's Focus, the four strided slices of every other row and column concatenated along the channels,
    torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1): SpaceToDepth,
    then a Gather putting the channels in the slices' order."""

    name = "pattern_space_to_depth_focus"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = FOCUS_INTS
    preserves_values = True
    onnx_since = 13
    onnx_types = ORT_FLOATS  # the fusion leaves float16 alone
    rewrites = (Rewrite("ort", "extended", ("SpaceToDepth", "Gather"), "SliceConcatToSpaceToDepthFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        n, c, h, w = x.shape
        attrs = {"order": ctx.choice("order", FOCUS_ORDERS), "chained": ctx.choice("chained", (False, True))}
        return Build([SymTensor((n, 4 * c, h / 2, w / 2), x.dtype)], [h % 2 == 0, w % 2 == 0], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[..., row::2, col::2] for row, col in focus_offsets(attrs["order"])], 1)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        pieces = ", ".join(f"{args[0]}[..., {row}::2, {col}::2]" for row, col in focus_offsets(attrs["order"]))
        return f"torch.cat([{pieces}], 1)"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x = call.inputs[0]
        pieces = []
        for row, col in focus_offsets(attrs["order"]):
            if attrs["chained"]:  # the TorchScript exporter's spelling: one Slice per indexed dim
                rows = call.node("Slice", [x, call.ints([row]), call.ints([INT64_MAX]), call.ints([2]),
                                           call.ints([2])])
                pieces.append(call.node("Slice", [rows, call.ints([col]), call.ints([INT64_MAX]), call.ints([3]),
                                                  call.ints([2])]))
            else:
                pieces.append(call.node("Slice", [x, call.ints([row, col]), call.ints([INT64_MAX] * 2),
                                                   call.ints([2, 3]), call.ints([2, 2])]))
        call.node("Concat", pieces, call.outputs, axis=1)
        return call.nodes


class BiasSkipLayerNorm(Pattern):
    """A batched projection, the bias added in front of it (bias + x @ w, w 3-D), a residual Add, then layer
    normalization over the last dim: SkipLayerNormFusion takes the residual Add, BiasSkipLayerNormFusion then the
    bias Add, leaving MatMul and SkipLayerNormalization. (A 2-D weight goes to MatMulAddFusion's Gemm first, and
    x @ w + bias to SkipLayerNormFusion's own bias input.)"""

    name = "pattern_bias_skip_layer_norm"
    ranks = ((3,), (3,))  # SkipLayerNormFusion takes [batch, sequence, hidden] and no broadcasting
    sigs = same_sigs(FLOATS, 2)
    float32_attrs = ("eps",)
    onnx_since = 13
    onnx_types = NORM_TYPES  # SkipLayerNormalization's CPU kernel takes float32: float64 stays unfused
    rewrites = (Rewrite("ort", "extended", ("MatMul", "SkipLayerNormalization"), "BiasSkipLayerNormFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor, skip: SymTensor) -> Build:
        w = ctx.weight(3, x.dtype)
        hidden = w.shape[2]
        reqs = [w.shape[0] == x.shape[0], w.shape[1] == x.shape[2], skip.shape[0] == x.shape[0],
                skip.shape[1] == x.shape[1], skip.shape[2] == hidden]
        reqs += [ctx.weight(1, x.dtype).shape[0] == hidden for _ in range(3)]
        return Build([SymTensor(skip.shape, x.dtype)], reqs, {"eps": ctx.choice("eps", EPS)})

    def forward(self, attrs: AttrMap, x: torch.Tensor, skip: torch.Tensor, w: torch.Tensor, bias: torch.Tensor,
                scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        y = bias + torch.matmul(x, w) + skip
        return F.layer_norm(y, (y.shape[-1],), scale, shift, eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, skip, w, bias, scale, shift = args
        y = f"({bias} + torch.matmul({x}, {w}) + {skip})"
        return call(functional_source(F.layer_norm), [y, f"({y}.shape[-1],)", scale, shift], eps=attrs["eps"])

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, skip, w, bias, scale, shift = call.inputs
        y = call.node("Add", [call.node("Add", [bias, call.node("MatMul", [x, w])]), skip])
        eps = float(attrs["eps"])
        if call.opset >= 17:
            call.node("LayerNormalization", [y, scale, shift], call.outputs, axis=-1, epsilon=eps)
            return call.nodes
        centred = call.node("Sub", [y, call.reduce("ReduceMean", y, [-1], keepdims=True)])
        var = call.reduce("ReduceMean", call.node("Pow", [centred, call.const(2.0, call.dtype)]), [-1], True)
        std = call.node("Sqrt", [call.node("Add", [var, call.const(eps, call.dtype)])])
        call.node("Add", [call.node("Mul", [call.node("Div", [centred, std]), scale]), shift], call.outputs)
        return call.nodes


OPS: list[type[OpSpec]] = [RmsNorm, SpaceToDepthFocus, BiasSkipLayerNorm]
