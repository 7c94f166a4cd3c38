"""Matrix products: matmul (every rank pairing torch allows), mm, bmm, mv, dot, outer, linear, addmm, einsum."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import ALL, FLOATS, DType
from generators.ops.base import (
    NARROW_INT_PRODUCTS,
    AttrMap,
    Build,
    BuildContext,
    Dim,
    OpSpec,
    SymTensor,
    broadcast,
    call,
    excluded,
    function_source,
    literal,
    same_sigs,
)
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC, OnnxCall, elementwise
from generators.ops.tf_sources import TF_FLOATS, TF_NUMERIC, TF_WIDE_INTS, TNP, like, tf_call

# int8/uint8 products accumulate in the same narrow type and wrap around; converters widen. Left out.
MATMUL_DTYPES = FLOATS + (DType.INT32, DType.INT64)
NARROW = excluded((DType.INT8, DType.UINT8), NARROW_INT_PRODUCTS)
MATRIX_RANKS = (1, 2, 3, 4, 5)
TF_MATMUL = TF_FLOATS | TF_WIDE_INTS  # TensorFlow's MatMul/Einsum kernels (no 8-bit, none for bool)
BATCHED_RANKS = (2, 3, 4, 5)


def broadcast_to(src: Sequence[Dim], dst: Sequence[Dim]) -> list[z3.BoolRef]:
    """Requirements for `src` to broadcast to `dst` without growing it (each dim equal or 1)."""
    if len(src) > len(dst):
        return [z3.BoolVal(False)]
    return [z3.Or(s == d, s == 1) for s, d in zip(src, dst[len(dst) - len(src):], strict=True)]


def matmul_shape(a: Sequence[Dim], b: Sequence[Dim]) -> tuple[tuple[Dim, ...], list[z3.BoolRef]]:
    """torch.matmul's shape rule: 1-D operands are promoted then squeezed; batch dims broadcast."""
    if len(a) == 1 and len(b) == 1:
        return (), [a[0] == b[0]]
    if len(b) == 1:
        return tuple(a[:-1]), [a[-1] == b[0]]
    if len(a) == 1:
        return tuple(b[:-2]) + (b[-1],), [a[0] == b[-2]]
    batch, reqs = broadcast(a[:-2], b[:-2])
    return batch + (a[-2], b[-1]), reqs + [a[-1] == b[-2]]


def scale_options(dtype: DType) -> tuple:
    """beta/alpha values: torch wants integers for integer tensors."""
    return (1, 0, 2, -1) if dtype.is_int else (1.0, 0.5, 0.0, -2.0)


class MatProduct(OpSpec):
    """Two operands whose shape rule is matmul's, restricted by `ranks`."""

    family = "linalg"
    sigs = same_sigs(MATMUL_DTYPES, 2)
    dtype_exclusions = NARROW
    fn = staticmethod(torch.matmul)

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build:
        shape, reqs = matmul_shape(a.shape, b.shape)
        return Build([SymTensor(shape, a.dtype)], reqs)

    def forward(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return type(self).fn(a, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args)

    tf_types, tf_fn = TF_MATMUL, "tf.linalg.matmul"

    # MatMul is numpy's matmul, torch's rule for every rank pairing (1-D promoted then squeezed, batches broadcast).
    onnx_since = 1
    onnx_types = ORT_NUMERIC

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "MatMul")


class Matmul(MatProduct):
    name = "matmul"
    ranks = (MATRIX_RANKS, MATRIX_RANKS)

    def forward(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        a, b = args
        return f"{a} @ {b}"

    tf_fn = f"{TNP}.matmul"  # numpy's matmul promotes and squeezes 1-D operands as torch's does; tf.linalg's not


class Mm(MatProduct):
    name = "mm"
    ranks = ((2,), (2,))
    fn = staticmethod(torch.mm)


class Bmm(MatProduct):
    name = "bmm"
    ranks = ((3,), (3,))
    fn = staticmethod(torch.bmm)

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build:
        build = super().build(ctx, a, b)
        build.requires.append(a.shape[0] == b.shape[0])  # bmm does not broadcast the batch
        return build


class Mv(MatProduct):
    name = "mv"
    ranks = ((2,), (1,))
    fn = staticmethod(torch.mv)
    tf_fn = "tf.linalg.matvec"


class Dot(MatProduct):
    name = "dot"
    ranks = ((1,), (1,))
    fn = staticmethod(torch.dot)
    tf_fn = "tf.tensordot({x}, {y}, axes=1)"


class Outer(MatProduct):
    """No accumulation, so every dtype is safe (bool means logical and)."""

    name = "outer"
    ranks = ((1,), (1,))
    sigs = same_sigs(ALL, 2)
    dtype_exclusions = MappingProxyType({})
    fn = staticmethod(torch.outer)
    # A column times a row; bools have no TensorFlow multiply, so `and` spells theirs.
    tf_types = TF_NUMERIC | {DType.BOOL}
    tf_fn = "tf.logical_and({x}[:, None], {y}) if {x}.dtype == tf.bool else {x}[:, None] * {y}"

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build:
        return Build([SymTensor((a.shape[0], b.shape[0]), a.dtype)])

    onnx_types = ORT_NUMERIC | {DType.BOOL}

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # A column times a row, broadcast; bools multiply as `and`. Reshape, not Unsqueeze: onnx 1.23's shape
        # inference with data propagation rejects Mul(Unsqueeze(a, [1]), b) of 1-D floats.
        a, b = call.inputs
        column = call.reshape(a, [call.in_types[0].shape[0], 1])
        call.node("And" if call.dtype is DType.BOOL else "Mul", [column, b], call.outputs)
        return call.nodes


class Linear(OpSpec):
    """F.linear(x, weight[out, in], bias[out] or None) over the last dim of x."""

    name = "linear"
    family = "linalg"
    sigs = same_sigs(MATMUL_DTYPES)
    dtype_exclusions = NARROW
    ranks = (MATRIX_RANKS,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        w = ctx.weight(2, x.dtype)
        reqs = [w.shape[1] == x.shape[-1]]
        bias = ctx.choice("bias", (True, False))
        if bias:
            reqs.append(ctx.weight(1, x.dtype).shape[0] == w.shape[0])
        return Build([SymTensor(x.shape[:-1] + (w.shape[0],), x.dtype)], reqs, {"bias": bias})

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return F.linear(x, w, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.linear", args)  # the bias is there when attrs["bias"] is

    tf_types = TF_MATMUL

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, w, *bias = args  # numpy's matmul takes a 1-D x as torch's linear does
        product = f"{TNP}.matmul({x}, tf.transpose({w}))"
        return f"{product} + {bias[0]}" if bias else product

    onnx_since = 1
    onnx_types = ORT_NUMERIC

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, w, *bias = call.inputs
        if call.rank == 2 and call.dtype in ORT_FLOATS:  # the Gemm exporters emit and optimizers fuse into
            call.node("Gemm", [x, w, *bias], call.outputs, transB=1)
            return call.nodes
        product = call.node("MatMul", [x, call.node("Transpose", [w], perm=[1, 0])], None if bias else call.outputs)
        if bias:
            call.node("Add", [product, bias[0]], call.outputs)
        return call.nodes


class AddMm(OpSpec):
    """beta * input + alpha * (m1 @ m2), with `input` broadcast to the product's shape."""

    name = "addmm"
    family = "linalg"
    sigs = same_sigs(MATMUL_DTYPES, 3)
    dtype_exclusions = NARROW
    ranks = ((0, 1, 2), (2,), (2,))
    fn = staticmethod(torch.addmm)

    def build(self, ctx: BuildContext, c: SymTensor, a: SymTensor, b: SymTensor) -> Build:
        shape, reqs = matmul_shape(a.shape, b.shape)
        if a.rank == 3:  # baddbmm: the batch does not broadcast
            reqs.append(a.shape[0] == b.shape[0])
        scales = scale_options(c.dtype)
        attrs = {"beta": ctx.choice("beta", scales), "alpha": ctx.choice("alpha", scales)}
        return Build([SymTensor(shape, c.dtype)], reqs + broadcast_to(c.shape, shape), attrs)

    def forward(self, attrs: AttrMap, c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return type(self).fn(c, a, b, beta=attrs["beta"], alpha=attrs["alpha"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args, beta=attrs["beta"], alpha=attrs["alpha"])

    tf_types = TF_MATMUL

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        c, a, b = args
        product = f"{like(attrs['alpha'], a)} * tf.linalg.matmul({a}, {b})"
        # torch ignores the input under beta 0 (its NaN and inf do not propagate), and it only broadcasts.
        return product if attrs["beta"] == 0 else f"{like(attrs['beta'], c)} * {c} + {product}"

    onnx_since = 1
    onnx_types = ORT_FLOATS  # Gemm is float-only; alpha and beta are exact in float32

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        c, a, b = call.inputs
        call.node("Gemm", [a, b, c], call.outputs, alpha=float(attrs["alpha"]), beta=float(attrs["beta"]))
        return call.nodes


class BaddBmm(AddMm):
    name = "baddbmm"
    ranks = ((0, 1, 2, 3), (3,), (3,))
    fn = staticmethod(torch.baddbmm)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        c, a, b = call.inputs  # beta * c + alpha * (a @ b), batched: no Gemm
        dtype = call.dtype
        product = call.node("Mul", [call.node("MatMul", [a, b]), call.const(attrs["alpha"], dtype)])
        call.node("Add", [call.node("Mul", [c, call.const(attrs["beta"], dtype)]), product], call.outputs)
        return call.nodes


# Equations by operand ranks; letters shared between operands must agree.
EINSUM_PATTERNS: dict[tuple[int, int], tuple[str, ...]] = {
    (1, 1): ("i,i->", "i,j->ij"),
    (2, 1): ("ij,j->i", "ij,i->j"),
    (2, 2): ("ij,jk->ik", "ij,kj->ik", "ij,ij->i", "bi,bj->bij", "ij,ij->"),
    (3, 3): ("bij,bjk->bik", "bij,bkj->bik", "bij,bij->bi"),
    (3, 1): ("bij,j->bi",),
    (3, 2): ("bij,jk->bik", "bij,kj->bki"),
    (4, 4): ("bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd"),
    (4, 2): ("bchw,dc->bdhw",),
}


class Einsum(OpSpec):
    """torch.einsum with a few equations models use (attention scores, batched products, contractions)."""

    name = "einsum"
    family = "linalg"
    sigs = same_sigs(MATMUL_DTYPES, 2)
    dtype_exclusions = MappingProxyType({**NARROW, DType.BOOL: "a bool einsum is an or of ands, and ONNX's Einsum "
                                                               "takes numbers only"})
    ranks = ((1, 2, 3, 4), (1, 2, 3, 4))

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build | None:
        patterns = EINSUM_PATTERNS.get((a.rank, b.rank))
        if not patterns:
            return None
        equation = ctx.choice("equation", patterns)
        lhs, out = equation.split("->")
        letters: dict[str, Dim] = {}
        reqs = []
        for spec, t in zip(lhs.split(","), (a, b), strict=True):
            for ch, d in zip(spec, t.shape, strict=True):
                if ch in letters:
                    reqs.append(letters[ch] == d)
                else:
                    letters[ch] = d
        return Build([SymTensor(tuple(letters[ch] for ch in out), a.dtype)], reqs, {"equation": equation})

    def forward(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.einsum(attrs["equation"], a, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.einsum", [literal(attrs["equation"]), *args])

    tf_types = TF_MATMUL

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call("tf.einsum", [repr(attrs["equation"]), *args])

    onnx_since = 12
    onnx_types = ORT_NUMERIC

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Einsum", equation=attrs["equation"])


OPS: list[type[OpSpec]] = [Matmul, Mm, Bmm, Mv, Dot, Outer, Linear, AddMm, BaddBmm, Einsum]
