"""Indexing operators: gather/scatter, index_select, masked_fill, embedding, and sorting (topk, sort, kthvalue).

Index tensors are int64 weights whose values the generator bounds to the indexed dim, so every call is in range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import ALL, DType
from generators.ops.base import (
    ANY_RANK,
    AttrMap,
    Build,
    BuildContext,
    Dim,
    OpSpec,
    Sig,
    SymTensor,
    call,
    literal,
    norm_axis,
    pick_axis,
    same_sigs,
)
from generators.ops.discontinuity import IndexTie, every_position, top_k_window
from generators.ops.onnx_nodes import ORT_NUMERIC, OnnxCall, axis_of, elementwise
from generators.ops.shape import ORT_ANY, fill_value, size_of
from generators.ops.ties import settle_tied_indices

POS_RANK = (1, 2, 3, 4, 5)
I64 = DType.INT64


class IndexOp(OpSpec):
    family = "index"
    sigs = same_sigs(ALL)
    ranks = (POS_RANK,)


def index_weight(ctx: BuildContext, rank: int, n: Dim, negative: bool = False) -> SymTensor:
    """An int64 weight of indices into a dim of size n; from -n when negative indices are legal."""
    return ctx.weight(rank, I64, lo=-n if negative else 0, hi=n - 1)


def replace_dim(shape: tuple[Dim, ...], axis: int, new: tuple[Dim, ...]) -> tuple[Dim, ...]:
    return shape[:axis] + new + shape[axis + 1:]


# ---- gathering --------------------------------------------------------------------------------------

class Gather(IndexOp):
    """torch.gather(x, dim, index): index has x's rank and is no larger than x off the axis."""
    preserves_values = True

    name = "gather"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        idx = index_weight(ctx, x.rank, x.shape[axis])
        reqs = [i <= d for k, (i, d) in enumerate(zip(idx.shape, x.shape, strict=True)) if k != axis]
        return Build([SymTensor(idx.shape, x.dtype)], reqs, {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, attrs["dim"], index)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, index = args
        return f"torch.gather({x}, {literal(attrs['dim'])}, {index})"

    onnx_since = 11
    onnx_types = ORT_ANY

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "GatherElements", axis=axis_of(attrs["dim"], call.rank))


class TakeAlongDim(IndexOp):
    """torch.take_along_dim(x, index, dim): index broadcasts with x off the axis; dim=None indexes the flat x."""
    preserves_values = True

    name = "take_along_dim"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        if ctx.choice("flat", (False, False, True)):
            idx = index_weight(ctx, 1, size_of(x.shape))
            return Build([SymTensor(idx.shape, x.dtype)], [], {"dim": None})
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        idx = index_weight(ctx, x.rank, x.shape[axis])
        reqs, shape = [], []
        for k, (i, d) in enumerate(zip(idx.shape, x.shape, strict=True)):
            if k == axis:
                shape.append(i)
            else:
                reqs.append(z3.Or(i == d, i == 1, d == 1))
                shape.append(z3.If(i == 1, d, i))
        return Build([SymTensor(tuple(shape), x.dtype)], reqs, {"dim": dim})

    # Without a dim, torch flattens x with a view, which eager torch refuses for a non-contiguous x (a transpose's
    # output): the flat form takes a contiguous copy, a no-op to the exporters.
    def forward(self, attrs: AttrMap, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        if attrs["dim"] is None:
            return torch.take_along_dim(x.contiguous(), index)
        return torch.take_along_dim(x, index, dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if attrs["dim"] is None:
            return call("torch.take_along_dim", [f"{args[0]}.contiguous()", *args[1:]])
        return call("torch.take_along_dim", args, dim=attrs["dim"])


class Take(IndexOp):
    """torch.take(x, index): indices into the flattened x, negative ones count from the end."""
    preserves_values = True

    name = "take"
    ranks = (ANY_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        idx = ctx.weight(ctx.choice("index_rank", (1, 2, 3)), I64, lo=-size_of(x.shape), hi=size_of(x.shape) - 1)
        return Build([SymTensor(idx.shape, x.dtype)])

    def forward(self, attrs: AttrMap, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.take(x, index)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.take", args)

    onnx_since = 5
    onnx_types = ORT_ANY

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, index = call.inputs  # indices into the flattened input; Gather counts negative ones from the end
        call.node("Gather", [call.reshape(x, [-1]), index], call.outputs, axis=0)
        return call.nodes


class IndexSelect(IndexOp):
    """torch.index_select(x, dim, index) with a 1-D index (repeats allowed)."""
    preserves_values = True

    name = "index_select"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        idx = index_weight(ctx, 1, x.shape[axis])
        return Build([SymTensor(replace_dim(x.shape, axis, idx.shape), x.dtype)], [], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, attrs["dim"], index)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, index = args
        return f"torch.index_select({x}, {literal(attrs['dim'])}, {index})"

    onnx_since = 1
    onnx_types = ORT_ANY

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Gather", axis=axis_of(attrs["dim"], call.rank))


class AdvancedIndex(IndexOp):
    """x[:, idx] with an int64 tensor index (1-D or 2-D, negative entries allowed): advanced indexing."""

    name = "index_tensor"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        axis = ctx.choice("axis", range(x.rank))
        idx = index_weight(ctx, ctx.choice("index_rank", (1, 1, 2)), x.shape[axis], negative=True)
        if x.rank - 1 + idx.rank > 5:
            return None
        return Build([SymTensor(replace_dim(x.shape, axis, idx.shape), x.dtype)], [], {"axis": axis})

    def forward(self, attrs: AttrMap, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x[(slice(None),) * attrs["axis"] + (index,)]

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, index = args
        return f"{x}[{':, ' * attrs['axis']}{index}]"

    onnx_since = 1
    onnx_types = ORT_ANY

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Gather", axis=attrs["axis"])  # negative indices count from the end in both


class Embedding(IndexOp):
    emits_zeros = True
    """F.embedding(index, table, padding_idx): the table is the data input, the index an int64 weight."""

    name = "embedding"
    ranks = ((2,),)

    def build(self, ctx: BuildContext, table: SymTensor) -> Build:
        rows, width = table.shape
        idx = index_weight(ctx, ctx.choice("index_rank", (1, 2, 3)), rows)
        padding = ctx.choice("padding", (None, "first", "last", "negative"))
        pad = {None: None, "first": 0, "last": rows - 1, "negative": -1}[padding]
        return Build([SymTensor(idx.shape + (width,), table.dtype)], [], {"padding_idx": pad})

    def forward(self, attrs: AttrMap, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return F.embedding(index, table, padding_idx=attrs["padding_idx"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        table, index = args
        return call("torch.nn.functional.embedding", [index, table], padding_idx=attrs["padding_idx"])

    onnx_since = 1
    onnx_types = ORT_ANY

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Gather", axis=0)  # padding_idx only stops gradients: the lookup is plain


# ---- writing ----------------------------------------------------------------------------------------

class MaskedFill(IndexOp):
    emits_zeros = True
    """x.masked_fill(mask, value) with a bool mask that broadcasts to x."""

    name = "masked_fill"
    sigs = tuple(Sig((d, DType.BOOL), d) for d in ALL)
    ranks = (ANY_RANK, ANY_RANK)

    def build(self, ctx: BuildContext, x: SymTensor, mask: SymTensor) -> Build:
        if mask.rank > x.rank:
            return None
        reqs = [z3.Or(m == d, m == 1) for m, d in zip(mask.shape[::-1], x.shape[::-1], strict=False)]
        return Build([SymTensor(x.shape, x.dtype)], reqs, {"value": fill_value(ctx, x.dtype)})

    def forward(self, attrs: AttrMap, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x.masked_fill(mask, attrs["value"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, mask = args
        return call(f"{x}.masked_fill", [mask], attrs["value"])

    onnx_since = 9
    onnx_types = ORT_NUMERIC | {DType.INT8, DType.UINT8}  # Where has no bool kernel in ONNX Runtime

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, mask = call.inputs
        call.node("Where", [mask, call.const(attrs["value"], call.dtype), x], call.outputs)
        return call.nodes


def scatter_index(ctx: BuildContext, x: SymTensor, src: SymTensor, axis: int) -> tuple[SymTensor, list]:
    """An index no larger than src anywhere and than x off the axis (torch's scatter rule)."""
    idx = index_weight(ctx, x.rank, x.shape[axis])
    reqs = [i <= s for i, s in zip(idx.shape, src.shape, strict=True)]
    reqs += [i <= d for k, (i, d) in enumerate(zip(idx.shape, x.shape, strict=True)) if k != axis]
    return idx, reqs


class Scatter(IndexOp):
    """x.scatter(dim, index, src) with one index entry along the axis, so no two writes collide."""

    name = "scatter"
    sigs = same_sigs(ALL, 2)
    ranks = (POS_RANK, POS_RANK)

    def build(self, ctx: BuildContext, x: SymTensor, src: SymTensor) -> Build:
        if src.rank != x.rank:
            return None
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        idx, reqs = scatter_index(ctx, x, src, axis)
        # Colliding writes leave an unspecified winner; a single entry along the axis rules them out.
        return Build([SymTensor(x.shape, x.dtype)], reqs + [idx.shape[axis] == 1], self.attrs(ctx, x, dim))

    def attrs(self, ctx: BuildContext, x: SymTensor, dim: int) -> dict:
        return {"dim": dim}

    def forward(self, attrs: AttrMap, x: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.scatter(attrs["dim"], index, src)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, src, index = args
        return f"{x}.scatter({literal(attrs['dim'])}, {index}, {src})"


class ScatterAdd(Scatter):
    """torch.scatter_add(x, dim, index, src): colliding writes add up."""

    name = "scatter_add"
    sigs = same_sigs(ALL, 2)  # bools accumulate as or

    def build(self, ctx: BuildContext, x: SymTensor, src: SymTensor) -> Build:
        if src.rank != x.rank:
            return None
        dim = pick_axis(ctx, x.rank)
        idx, reqs = scatter_index(ctx, x, src, norm_axis(dim, x.rank))
        return Build([SymTensor(x.shape, x.dtype)], reqs, self.attrs(ctx, x, dim))

    def forward(self, attrs: AttrMap, x: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.scatter_add(x, attrs["dim"], index, src)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, src, index = args
        return f"torch.scatter_add({x}, {literal(attrs['dim'])}, {index}, {src})"


class ScatterReduce(ScatterAdd):
    """x.scatter_reduce(dim, index, src, reduce, include_self)."""

    name = "scatter_reduce"
    sigs = same_sigs(ALL, 2)

    def attrs(self, ctx: BuildContext, x: SymTensor, dim: int) -> dict:
        reduces = ("sum", "prod", "amax", "amin") + (() if x.dtype is DType.BOOL else ("mean",))
        return {"dim": dim, "reduce": ctx.choice("reduce", reduces), "include_self": ctx.choice("self", (True, False))}

    def forward(self, attrs: AttrMap, x: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.scatter_reduce(attrs["dim"], index, src, attrs["reduce"], include_self=attrs["include_self"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, src, index = args
        return (f"{x}.scatter_reduce({literal(attrs['dim'])}, {index}, {src}, {literal(attrs['reduce'])}, "
                f"include_self={literal(attrs['include_self'])})")


class IndexAdd(IndexOp):
    """x.index_add(dim, index, source, alpha): source rows added at (possibly repeated) 1-D indices."""

    name = "index_add"
    sigs = same_sigs(ALL, 2)  # bools accumulate as or
    ranks = (POS_RANK, POS_RANK)

    def build(self, ctx: BuildContext, x: SymTensor, source: SymTensor) -> Build:
        if source.rank != x.rank:
            return None
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        idx = index_weight(ctx, 1, x.shape[axis])
        reqs = [s == (idx.shape[0] if k == axis else d) for k, (s, d) in enumerate(zip(source.shape, x.shape,
                                                                                        strict=True))]
        alpha = ctx.choice("alpha", (1, 2, -1) if x.dtype.is_signed else (1, 2))
        return Build([SymTensor(x.shape, x.dtype)], reqs, {"dim": dim, "alpha": alpha})

    def forward(self, attrs: AttrMap, x: torch.Tensor, source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.index_add(attrs["dim"], index, source, alpha=attrs["alpha"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, source, index = args
        return f"{x}.index_add({literal(attrs['dim'])}, {index}, {source}, alpha={literal(attrs['alpha'])})"


class IndexFill(IndexOp):
    emits_zeros = True
    """x.index_fill(dim, index, value): repeated indices write the same value, so order does not matter."""

    name = "index_fill"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        index_weight(ctx, 1, x.shape[norm_axis(dim, x.rank)], negative=True)
        return Build([SymTensor(x.shape, x.dtype)], [], {"dim": dim, "value": fill_value(ctx, x.dtype)})

    def forward(self, attrs: AttrMap, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.index_fill(attrs["dim"], index, attrs["value"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, index = args
        return f"{x}.index_fill({literal(attrs['dim'])}, {index}, {literal(attrs['value'])})"


class OneHot(IndexOp):
    emits_zeros = True
    """F.one_hot(index, num_classes): the index is an int64 weight in [0, num_classes)."""

    name = "one_hot"
    sigs = (Sig((), I64),)
    ranks = ()

    def build(self, ctx: BuildContext) -> Build:
        classes = ctx.int_attr("num_classes", 1, 32)
        idx = ctx.weight(ctx.choice("index_rank", (0, 1, 2, 3)), I64, lo=0, hi=classes - 1)
        return Build([SymTensor(idx.shape + (classes,), I64)], [], {"num_classes": classes})

    def forward(self, attrs: AttrMap, index: torch.Tensor) -> torch.Tensor:
        return F.one_hot(index, attrs["num_classes"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.one_hot", args, attrs["num_classes"])


# ---- ordering -----------------------------------------------------------------------------------------

NO_BOOL = same_sigs(ALL[:-1])  # topk/kthvalue have no bool kernel


def two(values: tuple[Dim, ...], dtype: DType, attrs: dict) -> Build:
    """Values and their int64 indices, both of one shape."""
    return Build([SymTensor(values, dtype), SymTensor(values, I64)], [], attrs)


class Topk(IndexOp):
    """torch.topk(x, k, dim, largest, sorted): values and indices."""

    name = "topk"
    sigs = NO_BOOL
    discontinuity = IndexTie(True, top_k_window)
    ranks = (ANY_RANK,)
    settles_output = True

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, max(x.rank, 1))
        axis = norm_axis(dim, x.rank)
        k = ctx.int_attr("k", 1, 64)
        shape = replace_dim(x.shape, axis, (k,)) if x.rank else ()
        build = two(shape, x.dtype, {"k": k, "dim": dim, "largest": ctx.choice("largest", (True, False)),
                                     "sorted": ctx.choice("sorted", (True, False))})
        build.requires.append(k <= (x.shape[axis] if x.rank else 1))
        return build

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = torch.topk(x, attrs["k"], dim=attrs["dim"], largest=attrs["largest"], sorted=attrs["sorted"])
        return tuple(out)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        topk = call("torch.topk", args, attrs["k"], dim=attrs["dim"], largest=attrs["largest"], sorted=attrs["sorted"])
        return f"tuple({topk})"

    def canonical_output(self, attrs: AttrMap, index: int, value: np.ndarray,
                         inputs: Sequence[np.ndarray]) -> np.ndarray:
        """Which of tied elements is picked is unspecified (indices are settled to the first positions of their
        values); sorted=False leaves the order of the k results unspecified too: both compare as sets."""
        if index == 1 and value.ndim:
            value = settle_tied_indices(inputs[0], value, attrs["dim"])
        if attrs["sorted"] or value.ndim == 0:
            return value
        return np.sort(value, axis=attrs["dim"])


class Kthvalue(IndexOp):
    """torch.kthvalue(x, k, dim, keepdim): the k-th smallest value and its index."""

    name = "kthvalue"
    sigs = NO_BOOL
    discontinuity = IndexTie(False, every_position)
    ranks = (ANY_RANK,)
    settles_output = True

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, max(x.rank, 1))
        axis = norm_axis(dim, x.rank)
        k = ctx.int_attr("k", 1, 64)
        keepdim = ctx.choice("keepdim", (False, True))
        shape = replace_dim(x.shape, axis, (z3.IntVal(1),) if keepdim else ()) if x.rank else ()
        build = two(shape, x.dtype, {"k": k, "dim": dim, "keepdim": keepdim})
        build.requires.append(k <= (x.shape[axis] if x.rank else 1))
        return build

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(torch.kthvalue(x, attrs["k"], dim=attrs["dim"], keepdim=attrs["keepdim"]))

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"tuple({call('torch.kthvalue', args, attrs['k'], dim=attrs['dim'], keepdim=attrs['keepdim'])})"

    def canonical_output(self, attrs: AttrMap, index: int, value: np.ndarray,
                         inputs: Sequence[np.ndarray]) -> np.ndarray:
        """Which of several k-th values the index names is unspecified (CUDA picks any)."""
        if index != 1 or inputs[0].ndim == 0:
            return value
        return settle_tied_indices(inputs[0], value, attrs["dim"], attrs["keepdim"])


class Sort(IndexOp):
    """torch.sort(x, dim, descending, stable): sorted values and the permutation."""

    name = "sort"
    ranks = (ANY_RANK,)
    discontinuity = IndexTie(False, every_position)  # Argsort inherits it
    settles_output = True
    index_output: ClassVar[int] = 1  # the permutation (Argsort's only output is 0)

    def sort_attrs(self, ctx: BuildContext, x: SymTensor) -> dict:
        return {"dim": pick_axis(ctx, max(x.rank, 1)), "descending": ctx.choice("descending", (False, True)),
                "stable": ctx.choice("stable", (False, True))}

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return two(x.shape, x.dtype, self.sort_attrs(ctx, x))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(torch.sort(x, dim=attrs["dim"], descending=attrs["descending"], stable=attrs["stable"]))

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"tuple({call('torch.sort', args, **self.sort_kwargs(attrs))})"

    def sort_kwargs(self, attrs: AttrMap) -> dict:
        return {"dim": attrs["dim"], "descending": attrs["descending"], "stable": attrs["stable"]}

    def canonical_output(self, attrs: AttrMap, index: int, value: np.ndarray,
                         inputs: Sequence[np.ndarray]) -> np.ndarray:
        """stable=False leaves the order of equal values unspecified: their indices are settled in ascending order
        (the values themselves are equal, so only the permutation needs it)."""
        if attrs["stable"] or index != self.index_output or inputs[0].ndim == 0:
            return value
        return settle_tied_indices(inputs[0], value, attrs["dim"])


class Argsort(Sort):
    """torch.argsort(x, dim, descending, stable)."""

    name = "argsort"
    sigs = same_sigs(ALL, out=I64)
    index_output: ClassVar[int] = 0

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, I64)], [], self.sort_attrs(ctx, x))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.argsort(x, dim=attrs["dim"], descending=attrs["descending"], stable=attrs["stable"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.argsort", args, **self.sort_kwargs(attrs))


OPS: list[type[OpSpec]] = [
    Gather, TakeAlongDim, Take, IndexSelect, AdvancedIndex, Embedding,
    MaskedFill, Scatter, ScatterAdd, ScatterReduce, IndexAdd, IndexFill, OneHot,
    Topk, Kthvalue, Sort, Argsort,
]
