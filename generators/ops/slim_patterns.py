"""Patterns for onnxslim's own fusions that never fired on our graphs (onnxslim 0.1.98).

onnxslim's matchers (onnxslim/core/pattern) want the constants they fold as initializers: a Constant node's output
is a variable to them until slim's own constant folding has run, and the coverage it records asks the matchers on
the model as received. So each pattern's folded constants are weights here (initializers in a native model and in
an export alike), and the patterns whose constants are shapes or axes (ReduceSum, then Unsqueeze) fire on the
dynamo export, which writes those as initializers, while the native model reaches the same rewrite inside slim.
Some also read intermediate shapes (FusionGemmAdd): those the dynamo export records, a native model does not.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS, INTS, DType
from generators.ops.base import (
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
from generators.ops.onnx_nodes import ORT_FLOATS, OnnxCall
from generators.ops.patterns import (
    CONV_INTS,
    MAX_KERNEL,
    ORT_CONV,
    Pattern,
    Rewrite,
    conv2d_build,
    conv2d_forward,
    conv2d_source,
    onnx_conv2d,
)

# ONNX Runtime's Gemm takes floats only: an integer linear layer never reaches onnxslim as a Gemm.
GEMM_INTS = excluded(INTS, "ONNX Runtime's Gemm takes floats only: an integer linear layer never "
                     "reaches onnxslim's Gemm fusions")
# torch sums integers and bools to int64; the integer sum is drawn by the reduction operators already.
SUM_INTS = excluded((*INTS, DType.BOOL), "torch sums integers and bools to int64, a cast then the int64 sum: the "
                    "reduction operators draw that already")

# torch eager transposes int64 convolutions only (on CPU); ONNX's ConvTranspose takes floats.
CONV_TRANSPOSE_INTS = excluded((DType.INT64,), "ONNX's ConvTranspose takes floats only: an integer transposed "
                               "convolution never reaches an ONNX tool's fusion")


class ConvMul(Pattern):
    """A Conv, then Mul by a [C_out, 1, 1] weight: the scale folds into the Conv's weight (and bias).
    (FusionConvMul squeezes the scale to one dim of C_out entries: one output channel squeezes to a scalar and is
    declined, so C_out is at least 2.)"""

    name = "pattern_conv_mul"
    onnx_core = "Conv"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = CONV_INTS
    onnx_since = 11
    onnx_types = ORT_CONV
    rewrites = (Rewrite("onnxslim", "", ("Conv",), "FusionConvMul"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        y, reqs, attrs = conv2d_build(ctx, x, ctx.choice("bias", (True, False)))
        s = ctx.weight(3, x.dtype)
        reqs += [y.shape[1] >= 2, s.shape[0] == y.shape[1], s.shape[1] == 1, s.shape[2] == 1]
        return Build([y], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        *b, s = rest
        return conv2d_forward(attrs, x, w, b[0] if b else None) * s

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, *b, s = args
        return f"{conv2d_source(attrs, x, w, b[0] if b else 'None')} * {s}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, *b, s = call.inputs
        call.node("Mul", [onnx_conv2d(call, attrs, x, w, b), s], call.outputs)
        return call.nodes


class ConvTransposeMul(Pattern):
    """A ConvTranspose (groups 1, no padding), then Mul by a [C_out, 1, 1] weight: the scale folds into the
    ConvTranspose's weight, whose output channels are its second dim (FusionConvTransposeMul; C_out at least 2, as
    for FusionConvMul)."""

    name = "pattern_conv_transpose_mul"
    onnx_core = "ConvTranspose"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = CONV_TRANSPOSE_INTS
    onnx_since = 11
    onnx_types = ORT_CONV
    rewrites = (Rewrite("onnxslim", "", ("ConvTranspose",), "FusionConvTransposeMul"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        n, c, h, w_ = x.shape
        w = ctx.weight(4, x.dtype)
        bias = ctx.choice("bias", (True, False))
        stride = (ctx.int_attr("stride0", 1, 2), ctx.int_attr("stride1", 1, 2))
        c_out = w.shape[1]
        reqs = [w.shape[0] == c, c_out >= 2, w.shape[2] <= MAX_KERNEL, w.shape[3] <= MAX_KERNEL]
        if bias:
            reqs.append(ctx.weight(1, x.dtype).shape[0] == c_out)
        s = ctx.weight(3, x.dtype)
        reqs += [s.shape[0] == c_out, s.shape[1] == 1, s.shape[2] == 1]
        out = (n, c_out, (h - 1) * stride[0] + w.shape[2], (w_ - 1) * stride[1] + w.shape[3])
        return Build([SymTensor(out, x.dtype)], reqs, {"stride": stride, "bias": bias})

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        *b, s = rest
        return F.conv_transpose2d(x, w, b[0] if b else None, stride=attrs["stride"]) * s

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, *b, s = args
        conv = call(functional_source(F.conv_transpose2d), [x, w, b[0] if b else "None"], stride=attrs["stride"])
        return f"{conv} * {s}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, *b, s = call.inputs
        y = call.node("ConvTranspose", [x, w, *b], kernel_shape=list(call.in_types[1].shape[2:]),
                      strides=list(attrs["stride"]), pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
        call.node("Mul", [y, s], call.outputs)
        return call.nodes


class SumUnsqueeze(Pattern):
    """A sum over one dim without keepdim, then that dim unsqueezed back: one ReduceSum keeping its dim
    (FusionReduce: ReduceSum only, and both axes constants; on the dynamo export, whose axes are initializers)."""

    name = "pattern_sum_unsqueeze"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = SUM_INTS
    onnx_since = 13
    onnx_types = ORT_FLOATS
    rewrites = (Rewrite("onnxslim", "", ("ReduceSum",), "FusionReduce"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = ctx.choice("dim", range(x.rank))
        shape = list(x.shape)
        shape[dim] = 1
        return Build([SymTensor(tuple(shape), x.dtype)], [], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, attrs["dim"]).unsqueeze(attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"torch.sum({args[0]}, {attrs['dim']}).unsqueeze({attrs['dim']})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        summed = call.reduce("ReduceSum", call.inputs[0], [attrs["dim"]], keepdims=False, axes_input_since=13)
        call.unsqueeze(summed, [attrs["dim"]], call.outputs[0])
        return call.nodes


class GemmReshapeMul(Pattern):
    """A linear layer on a 2-D input (Gemm), its rows reshaped to (groups, M / groups, N), then Mul by an [N]
    weight: the scale folds into the Gemm's weight and bias (FusionGemmMul)."""

    name = "pattern_gemm_reshape_mul"
    ranks = ((2,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = GEMM_INTS
    onnx_since = 11
    onnx_types = ORT_FLOATS
    rewrites = (Rewrite("onnxslim", "", ("Gemm", "Reshape"), "FusionGemmMul"),)
    torch_op, onnx_op = "*", "Mul"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        m, k = x.shape
        w, b, s = ctx.weight(2, x.dtype), ctx.weight(1, x.dtype), ctx.weight(1, x.dtype)
        n = w.shape[0]
        groups = ctx.choice("groups", (1, 2))
        reqs = [w.shape[1] == k, b.shape[0] == n, s.shape[0] == n, m % groups == 0]
        return Build([SymTensor((groups, m / groups, n), x.dtype)], reqs, {"groups": groups})

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                s: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, w, b).reshape(attrs["groups"], -1, w.shape[0])
        return y * s if self.onnx_op == "Mul" else y + s

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, b, s = args
        linear = call(functional_source(F.linear), [x, w, b])
        return f"{linear}.reshape({attrs['groups']}, -1, {w}.shape[0]) {self.torch_op} {s}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, b, s = call.inputs
        y = call.node("Gemm", [x, w, b], transB=1)
        call.node(self.onnx_op, [call.reshape(y, list(call.out_types[0].shape)), s], call.outputs)
        return call.nodes


class GemmReshapeAdd(GemmReshapeMul):
    """A linear layer on a 2-D input (Gemm), its rows reshaped to (groups, M / groups, N), then Add of an [N]
    weight: the Add joins the Gemm's bias (FusionGemmAdd; it reads the Gemm's and the Reshape's output shapes, which
    the dynamo export records and a native model leaves to slim's own shape inference)."""

    name = "pattern_gemm_reshape_add"
    rewrites = (Rewrite("onnxslim", "", ("Gemm", "Reshape"), "FusionGemmAdd"),)
    torch_op, onnx_op = "+", "Add"


OPS: list[type[OpSpec]] = [ConvMul, ConvTransposeMul, SumUnsqueeze, GemmReshapeMul, GemmReshapeAdd]
