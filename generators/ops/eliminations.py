"""Patterns for onnxoptimizer's fuse and eliminate passes that no generated model reached: a no-op Flatten, Concat of
a Concat, a keepdims-free reduction unsqueezed back, an If on a constant condition, ArgMax of a monotone function,
and three projections of one tensor (query, key, value).

Like generators/ops/patterns.py, `forward` is what a model author writes and the counterpart is the multi-node ONNX
pattern as the pass matches it; tests/test_onnx_patterns.py checks each declared rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import torch
import z3
from onnx import helper

from generators.dtypes import ALL, FLOATS, DType
from generators.ops.base import (
    NARROW_INT_PRODUCTS,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    call,
    clamp_penalty,
    excluded,
    literal,
    norm_axis,
    pick_axis,
    same_sigs,
)
from generators.ops.discontinuity import IndexTie
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC, OnnxCall, element_type
from generators.ops.patterns import Pattern, Rewrite

# Relu's and Neg's CPU kernels (an If's branches), and Exp's, Softmax's and ArgMax's.
F32_F64 = frozenset({DType.FLOAT32, DType.FLOAT64})
EXP_MAX = 80.0  # exp stays finite in float32: ties at inf would make the index ambiguous


class FlattenMatMul(Pattern):
    """Flatten of a 2-D input from axis 1 or -1 (a no-op), then a projection (MatMul by a weight), as a classifier's
    head writes it: the MatMul alone. (onnxoptimizer keeps a Flatten that writes a graph output, hence the MatMul.)"""

    name = "pattern_flatten_matmul"
    ranks = ((2,),)
    sigs = same_sigs(FLOATS + (DType.INT32, DType.INT64))
    dtype_exclusions = excluded((DType.INT8, DType.UINT8), NARROW_INT_PRODUCTS)
    onnx_since = 9
    onnx_types = ORT_NUMERIC
    rewrites = (Rewrite("onnxoptimizer", "eliminate_nop_flatten", ("MatMul",)),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        w = ctx.weight(2, x.dtype)
        attrs = {"axis": ctx.choice("axis", (1, -1))}
        return Build([SymTensor((x.shape[0], w.shape[1]), x.dtype)], [w.shape[0] == x.shape[1]], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.matmul(torch.flatten(x, attrs["axis"]), w)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"torch.matmul(torch.flatten({args[0]}, {attrs['axis']}), {args[1]})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w = call.inputs
        call.node("MatMul", [call.node("Flatten", [x], axis=attrs["axis"]), w], call.outputs)
        return call.nodes


class ConcatPair(Pattern):
    """Concat of a Concat of two inputs and a weight (a learned row) along one axis, the pair first or last:
    one Concat of the three."""

    name = "pattern_concat_pair"
    ranks = ((1, 2, 3, 4),) * 2
    sigs = same_sigs(ALL, 2)
    preserves_values = True
    keeps_zeros = True
    onnx_since = 4
    onnx_types = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL}  # native models store bfloat16 weights as float32
    rewrites = (Rewrite("onnxoptimizer", "fuse_consecutive_concats", ("Concat",)),
                Rewrite("onnxsim", "", ("Concat",)))

    def build(self, ctx: BuildContext, x: SymTensor, y: SymTensor) -> Build | None:
        rank = x.rank
        if y.rank != rank:
            return None
        w = ctx.weight(rank, x.dtype)
        dim = pick_axis(ctx, rank)
        axis = norm_axis(dim, rank)
        reqs = [t.shape[i] == x.shape[i] for t in (y, w) for i in range(rank) if i != axis]
        shape = list(x.shape)
        shape[axis] = z3.Sum(x.shape[axis], y.shape[axis], w.shape[axis])
        return Build([SymTensor(tuple(shape), x.dtype)], reqs, {"dim": dim, "pair_first": ctx.choice("pair_first",
                                                                                                      (True, False))})

    def forward(self, attrs: AttrMap, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        pair = torch.cat((x, y), attrs["dim"])
        return torch.cat((pair, w) if attrs["pair_first"] else (w, pair), attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        (x, y, w), dim = args, literal(attrs["dim"])
        pair = f"torch.cat(({x}, {y}), {dim})"
        return f"torch.cat(({pair}, {w}), {dim})" if attrs["pair_first"] else f"torch.cat(({w}, {pair}), {dim})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, y, w = call.inputs
        pair = call.node("Concat", [x, y], axis=attrs["dim"])  # negative in both where torch's is: the pass compares
        call.node("Concat", [pair, w] if attrs["pair_first"] else [w, pair], call.outputs, axis=attrs["dim"])
        return call.nodes


class MeanUnsqueeze(Pattern):
    """A mean over axes without keepdim, unsqueezed back at the same axes: one ReduceMean keeping its dims (the
    axes an attribute before opset 18, an input from it; the pass leaves their Constant)."""

    name = "pattern_mean_unsqueeze"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    onnx_since = 13
    onnx_types = ORT_FLOATS
    rewrites = (Rewrite("onnxoptimizer", "fuse_consecutive_reduce_unsqueeze", ("Constant", "ReduceMean")),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        rank = x.rank
        count = ctx.choice("count", range(1, rank + 1))
        first = ctx.choice("first", range(rank - count + 1))
        negative = ctx.choice("negative", (False, True))
        dims = tuple(d - rank if negative else d for d in range(first, first + count))
        shape = tuple(z3.IntVal(1) if first <= i < first + count else d for i, d in enumerate(x.shape))
        return Build([SymTensor(shape, x.dtype)], [], {"dims": dims})

    @staticmethod
    def unsqueeze_order(dims: Sequence[int]) -> list[int]:
        """The dims one at a time, each inserted where the mean removed it: from the front for non-negative dims,
        from the back for negative ones."""
        return sorted(dims, reverse=dims[0] < 0)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        y = x.mean(attrs["dims"])
        for d in self.unsqueeze_order(attrs["dims"]):
            y = y.unsqueeze(d)
        return y

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        restored = "".join(f".unsqueeze({d})" for d in self.unsqueeze_order(attrs["dims"]))
        return f"{args[0]}.mean({literal(attrs['dims'])}){restored}"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        dims = list(attrs["dims"])
        axes = call.ints(dims)  # one Constant for both, as exporters share it
        if call.opset >= 18:
            mean = call.node("ReduceMean", [call.inputs[0], axes], keepdims=0)
        else:
            mean = call.node("ReduceMean", [call.inputs[0]], axes=dims, keepdims=0)
        call.node("Unsqueeze", [mean, axes], call.outputs)
        return call.nodes


class ConstantIf(Pattern):
    """Add of a bias along the last dim, then an If on a constant condition (a configuration flag) whose taken
    branch is Relu and whose other branch is Neg: the Relu, inlined. Exporters evaluate the flag while tracing, so
    only the native form carries the If."""

    name = "pattern_constant_if"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS + (DType.INT32, DType.INT64, DType.INT8, DType.UINT8))
    emits_zeros = True
    onnx_since = 11
    onnx_types = F32_F64
    rewrites = (Rewrite("onnxoptimizer", "eliminate_if_with_const_cond", ("Add", "Constant", "Relu")),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        reqs = [ctx.weight(1, x.dtype).shape[0] == x.shape[-1]]
        return Build([SymTensor(x.shape, x.dtype)], reqs, {"flag": ctx.choice("flag", (True, False))})

    def forward(self, attrs: AttrMap, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + b)  # the taken branch, whichever way the flag points

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        y = f"({args[0]} + {args[1]})"
        relu, neg = f"torch.relu({y})", f"torch.neg({y})"
        return f"({relu} if True else {neg})" if attrs["flag"] else f"({neg} if False else {relu})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, out_type = call.node("Add", call.inputs), call.out_types[0]
        branches = []
        for op_type in ("Relu", "Neg") if attrs["flag"] else ("Neg", "Relu"):
            out = call.fresh(op_type.lower())
            info = helper.make_tensor_value_info(out, element_type(out_type.dtype), list(out_type.shape))
            branches.append(helper.make_graph([helper.make_node(op_type, [x], [out])], out, [], [info]))
        flag = call.const(attrs["flag"], DType.BOOL)
        call.node("If", [flag], call.outputs, then_branch=branches[0], else_branch=branches[1])
        return call.nodes


# The monotone functions onnxoptimizer's eliminate_nop_monotone_argmax sees through (Softmax's along ArgMax's axis).
MONOTONE = ("softmax", "log_softmax", "exp")


class MonotoneArgmax(Pattern):
    """ArgMax of softmax, log-softmax or exp of the input (along the same axis), as a float: ArgMax of the input.
    (The rewrite is exact only where the monotone function keeps distinct values distinct: rounding can tie them.)"""

    name = "pattern_monotone_argmax"
    ranks = ((1, 2, 3, 4),)
    sigs = same_sigs(FLOATS)
    emits_zeros = True
    discontinuity = IndexTie(True)
    onnx_since = 13
    onnx_types = F32_F64
    rewrites = (Rewrite("onnxoptimizer", "eliminate_nop_monotone_argmax", ("ArgMax", "Cast")),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim, keepdim = pick_axis(ctx, x.rank), ctx.choice("keepdim", (True, False))
        axis = norm_axis(dim, x.rank)
        if keepdim:
            shape = tuple(z3.IntVal(1) if i == axis else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        attrs = {"dim": dim, "keepdim": keepdim, "monotone": ctx.choice("monotone", MONOTONE)}
        return Build([SymTensor(shape, x.dtype)], [], attrs)

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        return clamp_penalty(x, hi=EXP_MAX) if attrs["monotone"] == "exp" else None

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        dim, monotone = attrs["dim"], attrs["monotone"]
        y = torch.exp(x) if monotone == "exp" else getattr(torch, monotone)(x, dim)
        return torch.argmax(y, dim, keepdim=attrs["keepdim"]).to(x.dtype)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, dim, monotone = args[0], attrs["dim"], attrs["monotone"]
        y = f"torch.exp({x})" if monotone == "exp" else f"torch.{monotone}({x}, {dim})"
        return f"{call('torch.argmax', [y], dim, keepdim=attrs['keepdim'])}.to({x}.dtype)"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, dim, monotone = call.inputs[0], attrs["dim"], attrs["monotone"]
        if monotone == "exp":
            y = call.node("Exp", [x])
        else:  # the same axis spelling as ArgMax's: the pass compares the two attributes
            y = call.node("Softmax" if monotone == "softmax" else "LogSoftmax", [x], axis=dim)
        index = call.node("ArgMax", [y], axis=dim, keepdims=int(attrs["keepdim"]))
        call.node("Cast", [index], call.outputs, to=element_type(call.dtype))
        return call.nodes


class QkvAttention(Pattern):
    """Single-head self-attention over a feature map's positions: transpose (C, L) to (L, C), query, key and value
    projections of it, softmax(q @ k^T * scale) @ v. fuse_qkv makes the three projections one MatMul by their
    concatenated weights and a Split (it needs the shared input to come from a node: hence the Transpose)."""

    name = "pattern_qkv_attention"
    ranks = ((2, 3),)
    sigs = same_sigs(FLOATS)
    onnx_since = 13
    onnx_types = F32_F64
    # The pass leaves the key and value MatMuls in place, dead.
    rewrites = (Rewrite("onnxoptimizer", "fuse_qkv", ("Transpose", "Concat", "MatMul", "Split", "MatMul", "MatMul",
                                                      "Transpose", "MatMul", "Constant", "Mul", "Softmax", "MatMul")),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        channels, length = x.shape[-2], x.shape[-1]
        ws = [ctx.weight(2, x.dtype) for _ in range(3)]
        reqs = [w.shape[0] == channels for w in ws] + [w.shape[1] == ws[0].shape[1] for w in ws[1:]]
        out = SymTensor(x.shape[:-2] + (length, ws[0].shape[1]), x.dtype)
        return Build([out], reqs, {"scale": ctx.choice("scale", (0.125, 0.5, 1.0))})

    def forward(self, attrs: AttrMap, x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                wv: torch.Tensor) -> torch.Tensor:
        t = x.transpose(-1, -2)
        q, k, v = t @ wq, t @ wk, t @ wv
        return torch.softmax(q @ k.transpose(-1, -2) * attrs["scale"], -1) @ v

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, wq, wk, wv = args
        t = f"{x}.transpose(-1, -2)"
        scores = f"({t} @ {wq}) @ ({t} @ {wk}).transpose(-1, -2) * {literal(attrs['scale'])}"
        return f"torch.softmax({scores}, -1) @ ({t} @ {wv})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, *ws = call.inputs
        perm = list(range(call.rank))
        perm[-2:] = perm[-1], perm[-2]
        t = call.node("Transpose", [x], perm=perm)
        q, k, v = (call.node("MatMul", [t, w]) for w in ws)
        scores = call.node("MatMul", [q, call.node("Transpose", [k], perm=perm)])
        scaled = call.node("Mul", [scores, call.const(attrs["scale"], call.dtype)])
        call.node("MatMul", [call.node("Softmax", [scaled], axis=-1), v], call.outputs)
        return call.nodes


OPS: list[type[OpSpec]] = [FlattenMatMul, ConcatPair, MeanUnsqueeze, ConstantIf, MonotoneArgmax, QkvAttention]
