"""Patterns: small subgraphs that ONNX tools fuse or eliminate, each one composite operator.

A random graph seldom holds Conv followed by BatchNormalization, a decomposed GELU or two Transposes in a row, so
the fusion passes of ONNX Runtime, onnxoptimizer, onnxsim and onnxslim go untested. Each operator here is one such
subgraph: `forward` is the plain sequence of torch ops a model author writes (so the exporters emit the pattern
too), and the counterpart writes the multi-node ONNX pattern as the tools' matchers expect it (constants as
Constant nodes, which ONNX Runtime turns into initializers). `rewrites` names the tools that rewrite it and the
node types they leave (tests/test_onnx_patterns.py checks each).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import ALL, FLOATS, INTS, NUMERIC, DType
from generators.ops.base import (
    BOOL_PROMOTES_TO_INT,
    INTS_PROMOTE,
    NARROW_INT_PRODUCTS,
    AttrMap,
    Build,
    BuildContext,
    Dim,
    OpSpec,
    Sig,
    SymTensor,
    broadcast_where,
    call,
    conv_out,
    excluded,
    functional_source,
    literal,
    numel,
    same_sigs,
)
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC, OnnxCall

ORT_CONV = frozenset({DType.FLOAT32, DType.FLOAT16})
# ONNX Runtime's Where kernel: the dtypes of its two value inputs.
ORT_WHERE = frozenset({DType.FLOAT32, DType.FLOAT64, DType.FLOAT16, DType.INT32, DType.INT64, DType.INT8,
                       DType.UINT8})
MAX_KERNEL = 3
EPS = (1e-5, 1e-6, 1e-3)
SQRT2 = math.sqrt(2.0)
SCALES = (0.125, 0.5, 2.0, 8.0)  # powers of two: a fused scale computes the same products
# torch eager convolves integers (on CPU), but ONNX's Conv takes floats only: no native model or exporter carries an
# integer convolution to the fusions these patterns exist for.
CONV_INTS = excluded(INTS, "ONNX's Conv takes floats only: an integer convolution never reaches an ONNX tool's fusion")


@dataclass(frozen=True)
class Rewrite:
    """What one tool makes of a pattern's one-node model: the tool (ort, onnxoptimizer, onnxsim, onnxslim), its
    setting (an ONNX Runtime level; the onnxoptimizer pass), and the node types of its output, in any order."""

    tool: str
    setting: str
    op_types: tuple[str, ...]
    # The rewrite as the tool's coverage names it (ONNX Runtime: the graph transformer its log says modified the
    # model, a rule-based transformer for its rules; onnxoptimizer: the pass itself).
    fires: str = ""

    @property
    def fired_as(self) -> str:
        return self.fires or (self.setting if self.tool == "onnxoptimizer" and "+" not in self.setting else "")


class Pattern(OpSpec):
    family = "pattern"
    # The rewrites the tools make of this pattern (tests/test_onnx_patterns.py runs each).
    rewrites: ClassVar[tuple[Rewrite, ...]] = ()

    def description(self) -> str:
        """What the pattern writes out (its docstring's opening words): a maintainer knows no `pattern_layer_norm`,
        only the operators it stands for."""
        summary = (type(self).__doc__ or "").strip().split("\n")[0].split(" (")[0].split(":")[0].rstrip(".")
        return summary[:1].lower() + summary[1:]


# ---- convolutions ---------------------------------------------------------------------------------

def conv2d_build(ctx: BuildContext, x: SymTensor, bias: bool,
                 pads: tuple[Dim, ...] | None = None) -> tuple[SymTensor, list[z3.BoolRef], dict]:
    """A 2-D convolution (groups 1) of the (N, C, H, W) input: its weight (and a [C_out] bias when `bias`), output,
    requirements and stride/padding attributes. Given `pads` (top, bottom, left, right), the input is padded by
    them outside the Conv, which pads nothing itself."""
    n, c, h, w_ = x.shape
    w = ctx.weight(4, x.dtype)
    c_out, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    stride = (ctx.int_attr("stride0", 1, 2), ctx.int_attr("stride1", 1, 2))
    if pads is None:
        padding, (h_in, w_in) = (ctx.int_attr("padding0", 0, 2), ctx.int_attr("padding1", 0, 2)), (h, w_)
    else:
        padding, (h_in, w_in) = (0, 0), (h + pads[0] + pads[1], w_ + pads[2] + pads[3])
    reqs = [w.shape[1] == c, kh <= MAX_KERNEL, kw <= MAX_KERNEL,
            h_in + 2 * padding[0] >= kh, w_in + 2 * padding[1] >= kw]
    if bias:
        reqs.append(ctx.weight(1, x.dtype).shape[0] == c_out)
    sizes = (conv_out(h_in, kh, stride[0], padding[0]), conv_out(w_in, kw, stride[1], padding[1]))
    return SymTensor((n, c_out) + sizes, x.dtype), reqs, {"stride": stride, "padding": padding, "bias": bias}


def conv2d_forward(attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return F.conv2d(x, w, b, stride=attrs["stride"], padding=attrs["padding"])


def conv2d_source(attrs: AttrMap, x: str, w: str, b: str) -> str:
    return call(functional_source(F.conv2d), [x, w, b], stride=attrs["stride"], padding=attrs["padding"])


def onnx_conv2d(call: OnnxCall, attrs: AttrMap, x: str, w: str, bias: Sequence[str], out: str | None = None,
                pads: Sequence[int] | None = None) -> str:
    kernel = list(call.in_types[1].shape[2:])
    pads = list(attrs["padding"]) * 2 if pads is None else list(pads)
    return call.node("Conv", [x, w, *bias], [out] if out else None, kernel_shape=kernel,
                     strides=list(attrs["stride"]), pads=pads, dilations=[1, 1], group=1)


class ConvBatchNorm(Pattern):
    """Conv followed by inference BatchNormalization: folded into the Conv's weight and bias."""

    name = "pattern_conv_bn"
    onnx_core = "Conv"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    float32_attrs = ("eps",)
    onnx_since = 9
    onnx_types = ORT_CONV
    # onnxoptimizer folds nothing: it computes the new weight and bias with nodes in front of the Conv.
    rewrites = (Rewrite("ort", "basic", ("Conv",), "Level1_RuleBasedTransformer"), Rewrite("onnxsim", "", ("Conv",)),
                Rewrite("onnxslim", "", ("Conv",)),
                Rewrite("onnxoptimizer", "fuse_bn_into_conv", ("Cast", "Add", "Sqrt", "Div", "Unsqueeze", "Mul", "Cast",
                                                                "Sub", "Mul", "Add", "Conv")))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        y, reqs, attrs = conv2d_build(ctx, x, ctx.choice("bias", (True, False)))
        c = y.shape[1]
        for lo, hi in ((-1.0, 1.0), (0.1, 2.0), (None, None), (None, None)):  # running mean, var, scale, bias
            reqs.append(ctx.weight(1, x.dtype, lo, hi).shape[0] == c)
        attrs["eps"] = ctx.choice("eps", EPS)
        return Build([y], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        w, *b = ws[:-4]
        mean, var, scale, shift = ws[-4:]
        y = conv2d_forward(attrs, x, w, b[0] if b else None)
        return F.batch_norm(y, mean, var, scale, shift, training=False, eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, *rest = args
        # The inputs, not the `bias` attribute, say whether there is a bias, as in forward: a reducer that sets the
        # attribute alone must not make the script compute another model than the one checked.
        conv = conv2d_source(attrs, x, w, rest[0] if len(rest) > 4 else "None")
        return call(functional_source(F.batch_norm), [conv, *rest[-4:]], training=False, eps=attrs["eps"])

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, *rest = call.inputs
        mean, var, scale, shift = rest[-4:]
        y = onnx_conv2d(call, attrs, x, w, rest[:-4])
        call.node("BatchNormalization", [y, scale, shift, mean, var], call.outputs, epsilon=float(attrs["eps"]))
        return call.nodes


class ConvAddBias(Pattern):
    """A bias-free Conv, then Add of a [C_out, 1, 1] bias: the Add becomes the Conv's bias."""

    name = "pattern_conv_add"
    onnx_core = "Conv"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = CONV_INTS
    onnx_since = 11
    onnx_types = ORT_CONV
    rewrites = (Rewrite("ort", "basic", ("Conv",), "Level1_RuleBasedTransformer"), Rewrite("onnxsim", "", ("Conv",)),
                Rewrite("onnxoptimizer", "fuse_add_bias_into_conv", ("Squeeze", "Conv")))  # the bias squeezed to [C]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        y, reqs, attrs = conv2d_build(ctx, x, bias=False)
        b = ctx.weight(3, x.dtype)
        reqs += [b.shape[0] == y.shape[1], b.shape[1] == 1, b.shape[2] == 1]
        return Build([y], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return conv2d_forward(attrs, x, w, None) + b

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, b = args
        return f"{conv2d_source(attrs, x, w, 'None')} + {b}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, b = call.inputs
        call.node("Add", [onnx_conv2d(call, attrs, x, w, []), b], call.outputs)
        return call.nodes


# The activations ONNX Runtime fuses into FusedConv, with their torch spelling.
CONV_ACTIVATIONS = ("relu", "relu6", "clip", "leaky_relu", "sigmoid", "tanh")


class ConvActivation(Pattern):
    """Conv followed by an activation (Relu, Clip, LeakyRelu, Sigmoid, Tanh): ONNX Runtime's FusedConv."""

    name = "pattern_conv_activation"
    onnx_core = "Conv"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = CONV_INTS
    emits_zeros = True
    onnx_since = 11
    onnx_types = ORT_CONV
    rewrites = (Rewrite("ort", "extended", ("FusedConv",), "ConvActivationFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        y, reqs, attrs = conv2d_build(ctx, x, ctx.choice("bias", (True, False)))
        attrs["activation"] = ctx.choice("activation", CONV_ACTIVATIONS)
        attrs["alpha"] = ctx.choice("alpha", (0.01, 0.2))
        return Build([y], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        y = conv2d_forward(attrs, x, w, b)
        act = attrs["activation"]
        if act == "relu":
            return F.relu(y)
        if act in ("relu6", "clip"):
            return torch.clamp(y, *self.bounds(act))
        if act == "leaky_relu":
            return F.leaky_relu(y, attrs["alpha"])
        return torch.sigmoid(y) if act == "sigmoid" else torch.tanh(y)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, *b = args
        y = conv2d_source(attrs, x, w, b[0] if b else "None")
        act = attrs["activation"]
        if act == "relu":
            return call(functional_source(F.relu), [y])
        if act in ("relu6", "clip"):
            return call("torch.clamp", [y], *self.bounds(act))
        if act == "leaky_relu":
            return call(functional_source(F.leaky_relu), [y], attrs["alpha"])
        return call(f"torch.{act}", [y])

    @staticmethod
    def bounds(act: str) -> tuple[float, float]:
        return (0.0, 6.0) if act == "relu6" else (-1.0, 1.0)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, *bias = call.inputs
        y = onnx_conv2d(call, attrs, x, w, bias)
        act = attrs["activation"]
        if act in ("relu6", "clip"):
            call.clip(y, *self.bounds(act), call.dtype, out=call.outputs[0])
        elif act == "leaky_relu":
            call.node("LeakyRelu", [y], call.outputs, alpha=float(attrs["alpha"]))
        else:
            call.node({"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}[act], [y], call.outputs)
        return call.nodes


class PadConv(Pattern):
    """An explicit zero Pad, then an unpadded Conv: the Pad moves into the Conv's pads."""

    name = "pattern_pad_conv"
    onnx_core = "Conv"
    ranks = ((4,),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = CONV_INTS
    emits_zeros = True
    onnx_since = 11
    onnx_types = ORT_CONV
    rewrites = (Rewrite("ort", "basic", ("Conv",), "Level1_RuleBasedTransformer"), Rewrite("onnxsim", "", ("Conv",)),
                Rewrite("onnxslim", "", ("Conv",)),
                Rewrite("onnxoptimizer", "fuse_pad_into_conv", ("Constant", "Conv")))  # the pads' Constant stays

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        pads = tuple(ctx.int_attr(f"pad{i}", 0, 2) for i in range(4))  # top, bottom, left, right
        y, reqs, attrs = conv2d_build(ctx, x, ctx.choice("bias", (True, False)), pads)
        reqs.append(z3.Or(*[p > 0 for p in pads]))
        attrs["pads"] = pads
        return Build([y], reqs, attrs)

    @staticmethod
    def torch_pads(attrs: AttrMap) -> tuple[int, ...]:
        top, bottom, left, right = attrs["pads"]
        return left, right, top, bottom

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return conv2d_forward(attrs, F.pad(x, self.torch_pads(attrs)), w, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, *b = args
        padded = call(functional_source(F.pad), [x], self.torch_pads(attrs))
        return conv2d_source(attrs, padded, w, b[0] if b else "None")

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, *bias = call.inputs
        top, bottom, left, right = attrs["pads"]
        padded = call.node("Pad", [x, call.ints([0, 0, top, left, 0, 0, bottom, right])], mode="constant")
        onnx_conv2d(call, attrs, padded, w, bias, call.outputs[0])
        return call.nodes


# ---- matrix products --------------------------------------------------------------------------------

class MatMulAdd(Pattern):
    """MatMul of a 2-D input by a weight, then Add of a bias: a Gemm."""

    name = "pattern_matmul_add"
    ranks = ((2,),)
    sigs = same_sigs(FLOATS + (DType.INT32, DType.INT64))
    dtype_exclusions = excluded((DType.INT8, DType.UINT8), NARROW_INT_PRODUCTS)
    onnx_since = 9
    onnx_types = ORT_NUMERIC
    rewrites = (Rewrite("ort", "basic", ("Gemm",), "MatMulAddFusion"), Rewrite("onnxsim", "", ("Gemm",)),
                Rewrite("onnxslim", "", ("Gemm",)),
                Rewrite("onnxoptimizer", "fuse_matmul_add_bias_into_gemm+eliminate_deadend", ("Gemm",)))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        w, b = ctx.weight(2, x.dtype), ctx.weight(1, x.dtype)
        reqs = [w.shape[0] == x.shape[1], b.shape[0] == w.shape[1]]
        return Build([SymTensor((x.shape[0], w.shape[1]), x.dtype)], reqs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, w) + b

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, w, b = args
        return f"torch.matmul({x}, {w}) + {b}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, b = call.inputs
        call.node("Add", [call.node("MatMul", [x, w]), b], call.outputs)
        return call.nodes


MATMUL_SCALINGS = ("div_input", "mul_input", "mul_output")


class MatMulScale(Pattern):
    """MatMul with its input divided or multiplied by a scalar, or its output scaled: one scaled FusedMatMul."""

    name = "pattern_matmul_scale"
    ranks = ((2, 3, 4),)
    sigs = same_sigs(FLOATS)
    onnx_since = 9
    onnx_types = ORT_FLOATS
    rewrites = (Rewrite("ort", "extended", ("FusedMatMul",), "MatMulScaleFusion"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        w = ctx.weight(2, x.dtype)
        attrs = {"scaling": ctx.choice("scaling", MATMUL_SCALINGS), "scale": ctx.choice("scale", SCALES)}
        return Build([SymTensor(x.shape[:-1] + (w.shape[1],), x.dtype)], [w.shape[0] == x.shape[-1]], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        scaling, scale = attrs["scaling"], attrs["scale"]
        if scaling == "div_input":
            return torch.matmul(x / scale, w)
        if scaling == "mul_input":
            return torch.matmul(x * scale, w)
        return torch.matmul(x, w) * scale

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        (x, w), scaling, scale = args, attrs["scaling"], literal(attrs["scale"])
        if scaling == "mul_output":
            return f"torch.matmul({x}, {w}) * {scale}"
        return f"torch.matmul({x} {'/' if scaling == 'div_input' else '*'} {scale}, {w})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        (x, w), scaling = call.inputs, attrs["scaling"]
        scale = call.const(attrs["scale"], call.dtype)
        if scaling == "mul_output":
            call.node("Mul", [call.node("MatMul", [x, w]), scale], call.outputs)
        else:
            scaled = call.node("Div" if scaling == "div_input" else "Mul", [x, scale])
            call.node("MatMul", [scaled, w], call.outputs)
        return call.nodes


# ---- layout: transposes, reshapes, squeezes ----------------------------------------------------------

def permuted(shape: Sequence[Dim], perm: Sequence[int]) -> tuple[Dim, ...]:
    return tuple(shape[p] for p in perm)


def compose(first: Sequence[int], second: Sequence[int]) -> tuple[int, ...]:
    """The one permutation doing `first`, then `second`."""
    return tuple(first[p] for p in second)


class TransposePair(Pattern):
    """Two Transposes in a row that are not the identity together: one Transpose."""

    name = "pattern_transpose_pair"
    ranks = ((3, 4, 5),)  # at rank 2 the only pair that is no identity together is no pair of moves
    sigs = same_sigs(ALL)
    preserves_values = True
    keeps_zeros = True
    onnx_since = 1
    onnx_types = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL, DType.BFLOAT16}
    rewrites = (Rewrite("ort", "basic", ("Transpose",), "TransposeOptimizer"), Rewrite("onnxsim", "", ("Transpose",)),
                Rewrite("onnxslim", "", ("Transpose",)),
                Rewrite("onnxoptimizer", "fuse_consecutive_transposes", ("Transpose",)))

    def perms(self, ctx: BuildContext, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        identity = tuple(range(rank))
        moves = [p for p in itertools.permutations(identity) if p != identity]
        first = ctx.choice("perm", moves)
        return first, ctx.choice("perm2", [p for p in moves if compose(first, p) != identity])

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        first, second = self.perms(ctx, x.rank)
        return Build([SymTensor(permuted(permuted(x.shape, first), second), x.dtype)], [],
                     {"perm": first, "perm2": second})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.permute(attrs["perm"]).permute(attrs["perm2"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"{args[0]}.permute({literal(attrs['perm'])}).permute({literal(attrs['perm2'])})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        inner = call.node("Transpose", call.inputs, perm=list(attrs["perm"]))
        call.node("Transpose", [inner], call.outputs, perm=list(attrs["perm2"]))
        return call.nodes


class TransposeInverse(TransposePair):
    """A Transpose and its inverse: both cancel, leaving the input (an Identity where it is the graph's output;
    onnxoptimizer leaves one Transpose of the identity permutation there, as it never removes a graph's output)."""

    name = "pattern_transpose_inverse"
    ranks = ((2, 3, 4, 5),)
    rewrites = (Rewrite("ort", "basic", ("Identity",), "TransposeOptimizer"), Rewrite("onnxslim", "", ("Identity",)),
                Rewrite("onnxoptimizer", "fuse_consecutive_transposes", ("Transpose",)))

    def perms(self, ctx: BuildContext, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        identity = tuple(range(rank))
        first = ctx.choice("perm", [p for p in itertools.permutations(identity) if p != identity])
        return first, tuple(sorted(identity, key=lambda i: first[i]))


class ReshapePair(Pattern):
    """A flattening Reshape, then a Reshape to two dims split after axis `split`: one Reshape."""

    name = "pattern_reshape_pair"
    ranks = ((1, 2, 3, 4, 5),)
    sigs = same_sigs(ALL)
    preserves_values = True
    keeps_zeros = True
    onnx_since = 5
    onnx_types = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL, DType.BFLOAT16}
    rewrites = (Rewrite("ort", "basic", ("Reshape",), "ReshapeFusion"), Rewrite("onnxsim", "", ("Reshape",)),
                Rewrite("onnxslim", "", ("Reshape",)))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        split = ctx.choice("split", range(x.rank + 1))
        shape = (numel(x.shape[:split]), numel(x.shape[split:]))
        return Build([SymTensor(shape, x.dtype)], [], {"split": split})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1).reshape(x.shape[:attrs["split"]].numel(), -1)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x = args[0]
        return f"{x}.reshape(-1).reshape({x}.shape[:{attrs['split']}].numel(), -1)"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.reshape(call.reshape(call.inputs[0], [-1]), list(call.out_types[0].shape), call.outputs[0])
        return call.nodes


class UnsqueezePair(Pattern):
    """Two Unsqueezes in a row: one Unsqueeze of both axes."""

    name = "pattern_unsqueeze_pair"
    ranks = ((0, 1, 2, 3),)
    sigs = same_sigs(ALL)
    preserves_values = True
    keeps_zeros = True
    onnx_since = 13
    onnx_types = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL, DType.BFLOAT16}
    # onnxoptimizer's fusion leaves the first Unsqueeze dead: eliminate_deadend removes it.
    rewrites = (Rewrite("onnxsim", "", ("Unsqueeze",)),
                Rewrite("onnxoptimizer", "fuse_consecutive_unsqueezes+eliminate_deadend", ("Unsqueeze",)))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        first = ctx.choice("dim", range(x.rank + 1))
        second = ctx.choice("dim2", range(x.rank + 2))
        shape = list(x.shape)
        shape.insert(first, z3.IntVal(1))
        shape.insert(second, z3.IntVal(1))
        return Build([SymTensor(tuple(shape), x.dtype)], [], {"dim": first, "dim2": second})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(attrs["dim"]).unsqueeze(attrs["dim2"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"{args[0]}.unsqueeze({attrs['dim']}).unsqueeze({attrs['dim2']})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.unsqueeze(call.unsqueeze(call.inputs[0], [attrs["dim"]]), [attrs["dim2"]], call.outputs[0])
        return call.nodes


class SqueezePair(Pattern):
    """Two Squeezes of single dims in a row: one Squeeze of both axes."""

    name = "pattern_squeeze_pair"
    ranks = ((2, 3, 4, 5),)
    sigs = same_sigs(ALL)
    preserves_values = True
    keeps_zeros = True
    onnx_since = 13
    onnx_types = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL, DType.BFLOAT16}
    rewrites = (Rewrite("onnxsim", "", ("Squeeze",)),
                Rewrite("onnxoptimizer", "fuse_consecutive_squeezes", ("Constant", "Squeeze")))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        first = ctx.choice("dim", range(x.rank))
        second = ctx.choice("dim2", range(x.rank - 1))
        rest = [d for i, d in enumerate(x.shape) if i != first]
        reqs = [x.shape[first] == 1, rest[second] == 1]
        return Build([SymTensor(tuple(d for i, d in enumerate(rest) if i != second), x.dtype)], reqs,
                     {"dim": first, "dim2": second})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.squeeze(attrs["dim"]).squeeze(attrs["dim2"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"{args[0]}.squeeze({attrs['dim']}).squeeze({attrs['dim2']})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.squeeze(call.squeeze(call.inputs[0], [attrs["dim"]]), [attrs["dim2"]], call.outputs[0])
        return call.nodes


# ---- eliminations -----------------------------------------------------------------------------------

class NoopArithmetic(Pattern):
    """Identity, then multiplication (or division) by 1 and addition (or subtraction) of 0: all removed, but for an
    Identity where the pattern writes the graph's output. (ONNX Runtime's NoopElimination keeps a node whose input
    is a graph input or whose output is a graph output, as in a graph of this node alone.)"""

    name = "pattern_noop_arithmetic"
    ranks = (tuple(range(6)),)
    sigs = same_sigs(NUMERIC)
    dtype_exclusions = excluded((DType.BOOL,), BOOL_PROMOTES_TO_INT)
    preserves_values = True
    keeps_zeros = True
    onnx_since = 7
    onnx_types = ORT_NUMERIC
    # onnxoptimizer's eliminate_nop_with_unit rewires the consumers and leaves the nodes dead: eliminate_deadend.
    rewrites = (Rewrite("onnxsim", "", ("Identity",)),
                Rewrite("onnxoptimizer", "eliminate_nop_with_unit+eliminate_deadend", ("Identity",)))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        scaling = ctx.choice("scaling", ("mul", "div") if x.dtype.is_float else ("mul",))  # int / is true division
        attrs = {"scaling": scaling, "shift": ctx.choice("shift", ("add", "sub"))}
        return Build([SymTensor(x.shape, x.dtype)], [], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        y = x * 1 if attrs["scaling"] == "mul" else x / 1
        return y + 0 if attrs["shift"] == "add" else y - 0

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"{args[0]} {'*' if attrs['scaling'] == 'mul' else '/'} 1 {'+' if attrs['shift'] == 'add' else '-'} 0"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x = call.node("Identity", call.inputs)
        y = call.node("Mul" if attrs["scaling"] == "mul" else "Div", [x, call.const(1, call.dtype)])
        call.node("Add" if attrs["shift"] == "add" else "Sub", [y, call.const(0, call.dtype)], call.outputs)
        return call.nodes


class NotWhere(Pattern):
    """Where on a negated condition: Where with the condition as is and the branches swapped."""

    name = "pattern_not_where"
    ranks = (tuple(range(5)),) * 3
    sigs = tuple(Sig((DType.BOOL, d, d), d) for d in ALL)
    preserves_values = True
    onnx_since = 9
    onnx_types = frozenset({DType.BOOL})
    rewrites = (Rewrite("ort", "basic", ("Where",), "Level1_RuleBasedTransformer"), Rewrite("onnxsim", "", ("Where",)),
                Rewrite("onnxoptimizer", "rewrite_where", ("Where",)))

    def build(self, ctx: BuildContext, cond: SymTensor, a: SymTensor, b: SymTensor) -> Build:
        shape, reqs = broadcast_where(cond.shape, a.shape, b.shape)
        return Build([SymTensor(shape, a.dtype)], reqs)

    def forward(self, attrs: AttrMap, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(~cond, a, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        cond, a, b = args
        return f"torch.where(~{cond}, {a}, {b})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if call.in_types[1].dtype not in ORT_WHERE:
            return None
        cond, a, b = call.inputs
        call.node("Where", [call.node("Not", [cond]), a, b], call.outputs)
        return call.nodes


# ---- decomposed activations and normalizations --------------------------------------------------------

class DecomposedGelu(Pattern):
    """GELU written out as BERT-style models do: x * 0.5 * (1 + erf(x / sqrt(2))), the half taken first or last
    (the two subgraphs ONNX Runtime's GeluFusion matches; it knows no x * (1 / sqrt(2)) spelling)."""

    name = "pattern_gelu"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = INTS_PROMOTE
    onnx_since = 9
    onnx_types = ORT_CONV  # Erf's kernels
    rewrites = (Rewrite("ort", "extended", ("Gelu",), "GeluFusionL2"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, x.dtype)], [], {"half_first": ctx.choice("half_first", (True, False))})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        if attrs["half_first"]:
            return x * 0.5 * (1.0 + torch.erf(x / SQRT2))
        return x * (1.0 + torch.erf(x / SQRT2)) * 0.5

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x = args[0]
        erf = f"(1.0 + torch.erf({x} / {SQRT2!r}))"
        return f"{x} * 0.5 * {erf}" if attrs["half_first"] else f"{x} * {erf} * 0.5"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, dtype = call.inputs[0], call.dtype
        erf = call.node("Erf", [call.node("Div", [x, call.const(SQRT2, dtype)])])
        one_plus = call.node("Add", [erf, call.const(1.0, dtype)])
        if attrs["half_first"]:
            call.node("Mul", [call.node("Mul", [x, call.const(0.5, dtype)]), one_plus], call.outputs)
        else:
            call.node("Mul", [call.node("Mul", [x, one_plus]), call.const(0.5, dtype)], call.outputs)
        return call.nodes


class DecomposedLayerNorm(Pattern):
    """Layer normalization over the last dim written out (mean, centre, variance, eps, sqrt, divide, scale,
    shift): ONNX Runtime's LayerNormalization."""

    name = "pattern_layer_norm"
    ranks = ((2, 3, 4),)
    sigs = same_sigs(FLOATS)
    onnx_since = 13
    # float16 is left out: five float16 roundings in a row stray past the one-op tolerance from torch, whose CPU
    # kernels reduce in float32.
    onnx_types = frozenset({DType.FLOAT32, DType.FLOAT64})
    rewrites = (Rewrite("ort", "extended", ("LayerNormalization",), "LayerNormFusionL1"),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        reqs = [ctx.weight(1, x.dtype).shape[0] == x.shape[-1] for _ in range(2)]
        return Build([SymTensor(x.shape, x.dtype)], reqs, {"eps": ctx.choice("eps", EPS)})

    def forward(self, attrs: AttrMap, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(-1, keepdim=True)
        var = centred.pow(2).mean(-1, keepdim=True)
        return centred / torch.sqrt(var + attrs["eps"]) * scale + shift

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, scale, shift = args
        centred = f"({x} - {x}.mean(-1, keepdim=True))"
        var = f"{centred}.pow(2).mean(-1, keepdim=True)"
        return f"{centred} / torch.sqrt({var} + {literal(attrs['eps'])}) * {scale} + {shift}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        (x, scale, shift), dtype = call.inputs, call.dtype
        centred = call.node("Sub", [x, call.reduce("ReduceMean", x, [-1], keepdims=True)])
        var = call.reduce("ReduceMean", call.node("Pow", [centred, call.const(2.0, dtype)]), [-1], keepdims=True)
        std = call.node("Sqrt", [call.node("Add", [var, call.const(attrs["eps"], dtype)])])
        normed = call.node("Mul", [call.node("Div", [centred, std]), scale])
        call.node("Add", [normed, shift], call.outputs)
        return call.nodes


OPS: list[type[OpSpec]] = [
    ConvBatchNorm, ConvAddBias, ConvActivation, PadConv, MatMulAdd, MatMulScale, TransposePair, TransposeInverse,
    ReshapePair, UnsqueezePair, SqueezePair, NoopArithmetic, NotWhere, DecomposedGelu, DecomposedLayerNorm,
]
