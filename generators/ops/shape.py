"""Shape and layout operators: reshape/view, transpose/permute, squeeze, expand, cat/split, pad, slicing, scans."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, ClassVar

import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import ALL, FLOATS, INTS, DType
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
    finite_max,
    function_source,
    literal,
    norm_axis,
    pick_axis,
    same_sigs,
)
from generators.ops.onnx_nodes import ORT_NUMERIC, OnnxCall, axis_of
from generators.ops.tf_sources import (
    INT64_OPERAND,
    TF_ALL,
    TF_NUMERIC,
    TNP,
    shape_around,
    tf_call,
    trailing_pads,
)

POS_RANK = (1, 2, 3, 4, 5)
MAX_RANK = 5
# ONNX Runtime's layout kernels (Reshape, Transpose, Concat, Split, Slice, Gather, Pad, Tile, Expand) move bytes,
# so they take every dtype but bfloat16 (left out of native models: ONNX's reference evaluator cannot check it).
ORT_ANY = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# ---- helpers ------------------------------------------------------------------------------------

def size_of(shape: Sequence[Dim]) -> z3.ArithRef:
    """The element count as a z3 expression (1 for a scalar)."""
    return z3.Product(*shape) if shape else z3.IntVal(1)


def fill_value(ctx: BuildContext, dtype: DType) -> float | int | bool:
    """A scalar the dtype can hold exactly, for pad/masked_fill values."""
    if dtype is DType.BOOL:
        return ctx.choice("value", (False, True))
    if dtype is DType.UINT8:
        return ctx.choice("value", (0, 1, 7, 255))
    if dtype.is_int:
        return ctx.choice("value", (0, 1, -3, 100))
    return ctx.choice("value", (0.0, 1.0, -2.5, 0.125, 1000.0))


class ShapeOp(OpSpec):
    """Shape ops move elements without arithmetic, so every dtype is accepted."""
    preserves_values = True

    family = "shape"
    sigs = same_sigs(ALL)
    ranks = (ANY_RANK,)
    onnx_types = ORT_ANY
    tf_types = TF_ALL


class ToShape(ShapeOp):
    """An op whose ONNX counterpart is a Reshape to its output's (concrete) shape."""

    onnx_since = 5

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.reshape(call.inputs[0], call.out_types[0].shape, call.outputs[0])
        return call.nodes


class Transposing(ShapeOp):
    """An op whose ONNX counterpart is one Transpose (`perm`: the input axis each output axis takes)."""

    onnx_since = 1

    def perm(self, attrs: AttrMap, rank: int) -> list[int]:
        raise NotImplementedError

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if not call.rank:  # a scalar's only permutation (an identity transpose is kept above rank 0)
            call.node("Identity", call.inputs, call.outputs)
        else:
            call.node("Transpose", call.inputs, call.outputs, perm=self.perm(attrs, call.rank))
        return call.nodes


# torch's TorchScript exporter copies a permute's or movedim's negative axes into the Transpose's perm, which ONNX
# does not allow: one root cause over both operators, which this feature names.
NEGATIVE_PERMUTATION = "permutation:negative-axes"


def negative_axes_feature(*axes: int | Sequence[int]) -> tuple[str, ...]:
    """NEGATIVE_PERMUTATION where any of the axes (single ones or tuples) counts from the back."""
    flat = [a for item in axes for a in ((item,) if isinstance(item, int) else item)]
    return (NEGATIVE_PERMUTATION,) if any(a < 0 for a in flat) else ()


def one(shape: Sequence[Dim], dtype: DType, requires: list | None = None, /, **attrs: Any) -> Build:
    """A single-output Build."""
    return Build([SymTensor(tuple(shape), dtype)], requires or [], attrs)


def method(x: str, name: str, *positional: Any, **kwargs: Any) -> str:
    """`x.name(<literals>)`: a tensor method call in source, the way models write most shape ops."""
    return call(f"{x}.{name}", [], *positional, **kwargs)


def index_source(x: str, axis: int, item: str) -> str:
    """`x[:, :, item]` for a non-negative axis, `x[..., item, :]` counting from the back for a negative one."""
    if axis < 0:
        return f"{x}[{', '.join(['...', item] + [':'] * (-axis - 1))}]"
    return f"{x}[{', '.join([':'] * axis + [item])}]"


# ---- reshaping ----------------------------------------------------------------------------------

def regroup(ctx: BuildContext, dims: Sequence[Dim], rank: int) -> tuple[list[Dim], list[z3.BoolRef]]:
    """Dims of `rank` with the same product: split some dims into two factors, then merge neighbours.

    Splitting and merging keeps each requirement a single small product, which z3 solves fast; a free
    factorization of the whole element count is too slow to solve.
    """
    parts, reqs = list(dims), []
    splits = ctx.choice("splits", range(0, 3)) + max(0, rank - len(parts))
    for i in range(splits):
        if not parts:
            parts.append(z3.IntVal(1))
            continue
        at = ctx.choice(f"split{i}", range(len(parts)))
        a, b = ctx.dim(), ctx.dim()
        reqs.append(a * b == parts[at])
        parts[at:at + 1] = [a, b]
    while len(parts) > max(rank, 1):
        at = ctx.choice(f"merge{len(parts)}", range(len(parts) - 1))
        parts[at:at + 2] = [parts[at] * parts[at + 1]]
    if rank == 0:
        reqs.append(size_of(parts) == 1)
        parts = []
    return parts, reqs


class Reshape(ShapeOp):
    """x.reshape(shape): a target rank is picked and z3 finds the factorization; sometimes one entry is -1."""

    name = "reshape"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dims, reqs = regroup(ctx, x.shape, ctx.choice("rank", range(MAX_RANK + 1)))
        shape: tuple = tuple(dims)
        if dims and ctx.choice("infer", (False, True)):
            i = ctx.choice("infer_at", range(len(dims)))
            shape = shape[:i] + (-1,) + shape[i + 1:]
        return one(dims, x.dtype, reqs, shape=shape)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(attrs["shape"])

    onnx_since = 5

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.reshape(call.inputs[0], attrs["shape"], call.outputs[0])  # the -1 stays for ONNX to infer
        return call.nodes

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "reshape", attrs["shape"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call("tf.reshape", args, attrs["shape"])


class View(Reshape):
    """x.contiguous().view(shape): the view idiom (contiguous because the input may be a transpose)."""

    name = "view"

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous().view(attrs["shape"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(f"{args[0]}.contiguous()", "view", attrs["shape"])


class Unflatten(ToShape):
    """x.unflatten(dim, sizes): one dim split into 2-3 factors, sometimes with a -1."""

    name = "unflatten"
    ranks = ((1, 2, 3, 4),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        parts = [ctx.dim() for _ in range(ctx.choice("parts", (2, 2, 3)))]
        if x.rank + len(parts) - 1 > MAX_RANK:
            return None
        sizes: tuple = tuple(parts)
        if ctx.choice("infer", (False, True)):
            i = ctx.choice("infer_at", range(len(parts)))
            sizes = sizes[:i] + (-1,) + sizes[i + 1:]
        axis = norm_axis(dim, x.rank)
        shape = x.shape[:axis] + tuple(parts) + x.shape[axis + 1:]
        return one(shape, x.dtype, [size_of(parts) == x.shape[axis]], dim=dim, sizes=sizes)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(attrs["dim"], attrs["sizes"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "unflatten", attrs["dim"], attrs["sizes"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return f"tf.reshape({args[0]}, {shape_around(args[0], attrs['dim'], attrs['dim'], attrs['sizes'])})"


class Flatten(ToShape):
    """torch.flatten(x, start_dim, end_dim)."""

    name = "flatten"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        if x.rank == 0:
            return one((z3.IntVal(1),), x.dtype, start_dim=0, end_dim=ctx.choice("end_dim", (0, -1)))
        start = ctx.choice("start", range(x.rank))
        end = ctx.choice("end", range(start, x.rank))
        shape = x.shape[:start] + (size_of(x.shape[start:end + 1]),) + x.shape[end + 1:]
        neg_start, neg_end = ctx.choice("negative", ((False, False), (True, False), (False, True), (True, True)))
        return one(shape, x.dtype, start_dim=start - x.rank if neg_start else start,
                   end_dim=end - x.rank if neg_end else end)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(x, attrs["start_dim"], attrs["end_dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.flatten", args, attrs["start_dim"], attrs["end_dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return f"tf.reshape({args[0]}, {shape_around(args[0], attrs['start_dim'], attrs['end_dim'], [-1])})"


# ---- axis order ---------------------------------------------------------------------------------

def maybe_contiguous(x: torch.Tensor, attrs: AttrMap) -> torch.Tensor:
    return x.contiguous() if attrs["contiguous"] else x


def maybe_contiguous_source(x: str, attrs: AttrMap) -> str:
    """The source of `maybe_contiguous`: `.contiguous()` appended when the attribute asks for it."""
    return f"{x}.contiguous()" if attrs["contiguous"] else x


class Transpose(Transposing):
    """x.transpose(d0, d1), sometimes followed by .contiguous() (the materialized-transpose idiom)."""

    name = "transpose"
    ranks = ((2, 3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        d0, d1 = ctx.choice("dims", list(itertools.combinations(range(x.rank), 2)))
        shape = list(x.shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        if ctx.choice("negative0", (False, True)):
            d0 -= x.rank
        if ctx.choice("negative1", (False, True)):
            d1 -= x.rank
        if ctx.choice("swap", (False, True)):
            d0, d1 = d1, d0
        return one(shape, x.dtype, dim0=d0, dim1=d1, contiguous=ctx.choice("contiguous", (False, True)))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return maybe_contiguous(x.transpose(attrs["dim0"], attrs["dim1"]), attrs)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return maybe_contiguous_source(method(args[0], "transpose", attrs["dim0"], attrs["dim1"]), attrs)

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call(f"{TNP}.swapaxes", args, attrs["dim0"], attrs["dim1"])

    def perm(self, attrs: AttrMap, rank: int) -> list[int]:
        order = list(range(rank))
        d0, d1 = axis_of(attrs["dim0"], rank), axis_of(attrs["dim1"], rank)
        order[d0], order[d1] = order[d1], order[d0]
        return order


class T(Transposing):
    """x.t(): the 0-2D transpose."""

    name = "t"
    ranks = ((0, 1, 2),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return one(x.shape[::-1], x.dtype)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.t()

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "t")

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call("tf.transpose", args)  # reverses every dim: t() of rank 0-2

    def perm(self, attrs: AttrMap, rank: int) -> list[int]:
        return list(range(rank))[::-1]


class Permute(Transposing):
    """x.permute(perm), sometimes followed by .contiguous()."""

    name = "permute"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        perm = ctx.choice("perm", list(itertools.permutations(range(x.rank))))
        shape = [x.shape[p] for p in perm]
        if x.rank and ctx.choice("negative", (False, True)):
            perm = tuple(p - x.rank if ctx.choice(f"neg{i}", (False, True)) else p for i, p in enumerate(perm))
        return one(shape, x.dtype, perm=tuple(perm), contiguous=ctx.choice("contiguous", (False, True)))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return maybe_contiguous(x.permute(attrs["perm"]), attrs)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return maybe_contiguous_source(method(args[0], "permute", attrs["perm"]), attrs)

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        rank = len(attrs["perm"])
        return tf_call("tf.transpose", args, perm=[p % rank for p in attrs["perm"]])

    def perm(self, attrs: AttrMap, rank: int) -> list[int]:
        return [axis_of(p, rank) for p in attrs["perm"]]

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        return negative_axes_feature(attrs["perm"])


class Movedim(Transposing):
    """torch.movedim(x, source, destination) with one axis or a tuple of axes."""

    name = "movedim"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        r = x.rank
        count = ctx.choice("count", range(1, r + 1))
        src = ctx.rng.sample(range(r), count)
        dst = ctx.rng.sample(range(r), count)
        order: list[int | None] = [None] * r
        for s, d in zip(src, dst, strict=True):
            order[d] = s
        rest = iter(i for i in range(r) if i not in src)
        order = [o if o is not None else next(rest) for o in order]
        shape = [x.shape[o] for o in order]
        src = [s - r if ctx.choice(f"src_neg{i}", (False, True)) else s for i, s in enumerate(src)]
        if count == 1 and ctx.choice("scalar", (False, True)):
            return one(shape, x.dtype, source=src[0], destination=dst[0])
        return one(shape, x.dtype, source=tuple(src), destination=tuple(dst))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.movedim(x, attrs["source"], attrs["destination"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.movedim", args, attrs["source"], attrs["destination"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call(f"{TNP}.moveaxis", args, attrs["source"], attrs["destination"])

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        return negative_axes_feature(*(attrs[key] for key in ("source", "destination")))

    def perm(self, attrs: AttrMap, rank: int) -> list[int]:
        """As `build` orders the axes: each source lands at its destination, the rest keep their order."""
        sources, destinations = attrs["source"], attrs["destination"]
        if isinstance(sources, int):
            sources, destinations = (sources,), (destinations,)
        moved = {axis_of(d, rank): axis_of(s, rank) for s, d in zip(sources, destinations, strict=True)}
        rest = iter(i for i in range(rank) if i not in moved.values())
        return [moved[i] if i in moved else next(rest) for i in range(rank)]


# ---- size-1 dims and broadcasting ----------------------------------------------------------------

class Squeeze(ShapeOp):
    """x.squeeze(...): one size-1 dim, a tuple of them, all of them, or a dim that is not 1 (a no-op)."""

    name = "squeeze"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        mode = ctx.choice("mode", ("dim", "dims", "all", "noop") if x.rank else ("all",))
        if mode == "all":
            ones = {i for i in range(x.rank) if ctx.choice(f"one{i}", (False, True))}
            reqs = [x.shape[i] == 1 if i in ones else x.shape[i] >= 2 for i in range(x.rank)]
            return one([d for i, d in enumerate(x.shape) if i not in ones], x.dtype, reqs, dim=None)
        if mode == "noop":
            dim = pick_axis(ctx, x.rank)
            return one(x.shape, x.dtype, [x.shape[dim] >= 2], dim=dim)
        count = 1 if mode == "dim" else ctx.choice("count", range(1, x.rank + 1))
        axes = ctx.rng.sample(range(x.rank), count)
        dims = tuple(a - x.rank if ctx.choice(f"neg{i}", (False, True)) else a for i, a in enumerate(axes))
        shape = [d for i, d in enumerate(x.shape) if i not in axes]
        return one(shape, x.dtype, [x.shape[a] == 1 for a in axes], dim=dims[0] if mode == "dim" else dims)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.squeeze() if attrs["dim"] is None else x.squeeze(attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "squeeze") if attrs["dim"] is None else method(args[0], "squeeze", attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, dim = args[0], attrs["dim"]
        if dim is None or isinstance(dim, tuple):
            return tf_call("tf.squeeze", args, **({} if dim is None else {"axis": dim}))
        # torch leaves a dim that is not 1 alone, where tf.squeeze raises.
        return f"({tf_call('tf.squeeze', args, axis=dim)} if {x}.shape[{dim}] == 1 else {x})"

    onnx_since = 13  # axes as an input

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        shape, dim = call.in_types[0].shape, attrs["dim"]
        named = range(call.rank) if dim is None else [dim] if isinstance(dim, int) else dim
        axes = sorted({axis_of(a, call.rank) for a in named if shape[a] == 1})  # torch skips dims that are not 1
        if axes:
            call.squeeze(call.inputs[0], axes, call.outputs[0])
        else:
            call.node("Identity", call.inputs, call.outputs)
        return call.nodes


class Unsqueeze(ShapeOp):
    """x.unsqueeze(dim), dim in [-rank-1, rank]."""

    name = "unsqueeze"
    ranks = ((0, 1, 2, 3, 4),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank + 1)
        axis = norm_axis(dim, x.rank + 1)
        return one(x.shape[:axis] + (z3.IntVal(1),) + x.shape[axis:], x.dtype, dim=dim)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "unsqueeze", attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call("tf.expand_dims", args, axis=attrs["dim"])

    onnx_since = 13  # axes as an input

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.unsqueeze(call.inputs[0], [axis_of(attrs["dim"], call.rank + 1)], call.outputs[0])
        return call.nodes


class Expand(ShapeOp):
    """x.expand(sizes): size-1 dims grow, new leading dims appear, kept dims are written as -1 or their size."""

    name = "expand"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        lead = ctx.choice("lead", range(0, min(2, MAX_RANK - x.rank) + 1))
        shape: list = [ctx.dim() for _ in range(lead)]
        sizes: list = list(shape)
        reqs = []
        for i, d in enumerate(x.shape):
            how = ctx.choice(f"how{i}", ("grow", "keep", "minus_one"))
            if how == "grow":
                new = ctx.dim()
                reqs.append(d == 1)
                shape.append(new)
                sizes.append(new)
            else:
                shape.append(d)
                sizes.append(-1 if how == "minus_one" else d)
        return one(shape, x.dtype, reqs, sizes=tuple(sizes))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.expand(attrs["sizes"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "expand", attrs["sizes"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        sizes = attrs["sizes"]
        # -1 keeps the input's dim (aligned from the back), which tf.broadcast_to spells as that size.
        dims = [f"{args[0]}.shape[{i - len(sizes)}]" if s == -1 else str(s) for i, s in enumerate(sizes)]
        return f"tf.broadcast_to({args[0]}, [{', '.join(dims)}])"

    onnx_since = 8

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.node("Expand", [call.inputs[0], call.ints(call.out_types[0].shape)], call.outputs)
        return call.nodes


class BroadcastTo(Expand):
    """torch.broadcast_to(x, shape): the functional spelling of expand."""

    name = "broadcast_to"

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.broadcast_to(x, attrs["sizes"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.broadcast_to", args, attrs["sizes"])


# ---- joining and splitting ------------------------------------------------------------------------

class Cat(ShapeOp):
    """torch.cat of inputs with one rank and dtype, equal except along the axis."""

    name = "cat"
    sigs = same_sigs(ALL, 2)
    ranks = (POS_RANK, POS_RANK)

    def build(self, ctx: BuildContext, *xs: SymTensor) -> Build:
        rank = xs[0].rank
        if any(x.rank != rank for x in xs):
            return None
        dim = pick_axis(ctx, rank)
        axis = norm_axis(dim, rank)
        reqs = [x.shape[i] == xs[0].shape[i] for x in xs[1:] for i in range(rank) if i != axis]
        shape = list(xs[0].shape)
        shape[axis] = z3.Sum(*(x.shape[axis] for x in xs))
        return one(shape, xs[0].dtype, reqs, dim=dim)

    def forward(self, attrs: AttrMap, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"torch.cat(({', '.join(args)}), dim={literal(attrs['dim'])})"

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return f"tf.concat([{', '.join(args)}], axis={attrs['dim']})"

    onnx_since = 4

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.node("Concat", call.inputs, call.outputs, axis=axis_of(attrs["dim"], call.rank))
        return call.nodes


class Cat3(Cat):
    """torch.cat((x, y, w)) where w is a weight (a learned token/row); three data inputs of one rank are rarely
    at hand, so the third is made to fit."""

    name = "cat3"

    def build(self, ctx: BuildContext, *xs: SymTensor) -> Build:
        if xs[0].rank != xs[1].rank:
            return None
        return super().build(ctx, *xs, ctx.weight(xs[0].rank, xs[0].dtype))


class Stack(ShapeOp):
    """torch.stack of same-shape inputs along a new axis."""

    name = "stack"
    sigs = same_sigs(ALL, 2)
    ranks = ((0, 1, 2, 3, 4),) * 2

    def build(self, ctx: BuildContext, *xs: SymTensor) -> Build:
        rank = xs[0].rank
        if any(x.rank != rank for x in xs):
            return None
        dim = pick_axis(ctx, rank + 1)
        axis = norm_axis(dim, rank + 1)
        reqs = [x.shape[i] == xs[0].shape[i] for x in xs[1:] for i in range(rank)]
        shape = xs[0].shape[:axis] + (z3.IntVal(len(xs)),) + xs[0].shape[axis:]
        return one(shape, xs[0].dtype, reqs, dim=dim)

    def forward(self, attrs: AttrMap, *xs: torch.Tensor) -> torch.Tensor:
        return torch.stack(xs, dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"torch.stack(({', '.join(args)}), dim={literal(attrs['dim'])})"

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return f"tf.stack([{', '.join(args)}], axis={attrs['dim']})"

    onnx_since = 13  # Unsqueeze's axes as an input

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        axis = axis_of(attrs["dim"], call.rank + 1)
        call.node("Concat", [call.unsqueeze(x, [axis]) for x in call.inputs], call.outputs, axis=axis)
        return call.nodes


class Stack3(Stack):
    name = "stack3"
    sigs = same_sigs(ALL, 3)
    ranks = ((0, 1, 2, 3, 4),) * 3


def pieces(x: SymTensor, axis: int, sizes: Sequence[Dim]) -> list[SymTensor]:
    """The outputs of splitting `x` along `axis` into the given sizes."""
    return [SymTensor(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes]


def even_pieces(n: Dim, size: Dim, count: int) -> tuple[list[Dim], list[z3.BoolRef]]:
    """`count` pieces of `size` with a shorter last one, and the requirement that exactly `count` come out."""
    last = n - (count - 1) * size
    return [size] * (count - 1) + [last], [(count - 1) * size < n, n <= count * size]


class Splitting(ShapeOp):
    """An op that cuts its input along `dim` into its outputs: one Split with the outputs' sizes."""

    returns_sequence = True

    onnx_since = 13  # the sizes as an input (from 18, `num_outputs` where the pieces are even)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        axis = axis_of(attrs["dim"], call.rank)
        call.split(call.inputs[0], [t.shape[axis] for t in call.out_types], axis, call.outputs)
        return call.nodes


class Split(Splitting):
    """torch.split(x, split_size_or_sections, dim): multi-output."""

    name = "split"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        n = x.shape[axis]
        count = ctx.choice("count", (1, 2, 2, 3, 4))
        if ctx.choice("sections", (False, True)):
            sizes: list = [ctx.dim() for _ in range(count)]
            return Build(pieces(x, axis, sizes), [z3.Sum(*sizes) == n], {"split": tuple(sizes), "dim": dim})
        size = ctx.int_attr("split_size", 1, 64)
        sizes, reqs = even_pieces(n, size, count)
        return Build(pieces(x, axis, sizes), reqs, {"split": size, "dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.split(x, attrs["split"], dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.split", args, attrs["split"], dim=attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        size, dim = attrs["split"], attrs["dim"]
        if isinstance(size, tuple):
            return tf_call("tf.split", args, size, axis=dim)
        n = f"{args[0]}.shape[{dim}]"  # pieces of `size`, the last one shorter
        return f"tf.split({args[0]}, [min({size}, {n} - i) for i in range(0, {n}, {size})], axis={dim})"


class Chunk(Splitting):
    """torch.chunk(x, chunks, dim): may yield fewer than `chunks` pieces, which converters get wrong."""

    name = "chunk"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        n = x.shape[axis]
        chunks = ctx.choice("chunks", (1, 2, 3, 4, 5))
        count = ctx.choice("count", range(max(1, chunks - 2), chunks + 1))
        sizes, reqs = even_pieces(n, (n + chunks - 1) / chunks, count)
        return Build(pieces(x, axis, sizes), reqs, {"chunks": chunks, "dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.chunk(x, attrs["chunks"], dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.chunk", args, attrs["chunks"], dim=attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        dim, n = attrs["dim"], f"{args[0]}.shape[{attrs['dim']}]"
        size = f"-(-{n} // {attrs['chunks']})"  # torch's pieces: ceil(n / chunks) each, the last one shorter
        return f"tf.split({args[0]}, [min({size}, {n} - i) for i in range(0, {n}, {size})], axis={dim})"


class TensorSplit(Splitting):
    """torch.tensor_split(x, sections or indices, dim)."""

    name = "tensor_split"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        n = x.shape[axis]
        count = ctx.choice("count", (1, 2, 3, 4))
        if ctx.choice("indices", (False, True)):
            cuts = [ctx.int_attr(f"index{i}", 1, 63) for i in range(count - 1)]
            bounds = [z3.IntVal(0)] + cuts + [n]
            sizes = [b - a for a, b in itertools.pairwise(bounds)]
            return Build(pieces(x, axis, sizes), [], {"split": tuple(cuts), "dim": dim})
        # The first n % count pieces get one extra element.
        sizes = [n / count + z3.If(i < n % count, 1, 0) for i in range(count)]
        return Build(pieces(x, axis, sizes), [], {"split": count, "dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.tensor_split(x, attrs["split"], dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.tensor_split", args, attrs["split"], dim=attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, split, dim = args[0], attrs["split"], attrs["dim"]
        if isinstance(split, tuple):  # cut points, clamped like Python slices (as torch's are)
            bounds = ["", *map(str, split), ""]
            pieces = [index_source(x, dim, f"{a}:{b}") for a, b in itertools.pairwise(bounds)]
            return f"({', '.join(pieces)},)"
        n = f"{x}.shape[{dim}]"  # the first n % split pieces get one more
        return f"tf.split({x}, [{n} // {split} + (i < {n} % {split}) for i in range({split})], axis={dim})"


class Unbind(ShapeOp):
    """torch.unbind(x, dim): one output per slice of a small dim."""

    returns_sequence = True

    name = "unbind"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        count = ctx.choice("count", (1, 2, 3, 4))
        out = SymTensor(x.shape[:axis] + x.shape[axis + 1:], x.dtype)
        return Build([out] * count, [x.shape[axis] == count], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.unbind(x, dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.unbind", args, dim=attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call("tf.unstack", args, axis=attrs["dim"])

    onnx_since = 13

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        axis = axis_of(attrs["dim"], call.rank)
        pieces = [call.fresh("piece") for _ in call.outputs]
        call.split(call.inputs[0], [1] * len(pieces), axis, pieces)
        for piece, out in zip(pieces, call.outputs, strict=True):
            call.squeeze(piece, [axis], out)
        return call.nodes


# ---- windows: narrow, slicing, select, pad ------------------------------------------------------

def signed_index(ctx: BuildContext, name: str, n: Dim, negative: bool) -> tuple[Any, Dim]:
    """An index attribute into a dim of size n, written negative when asked: (attr value, position from 0)."""
    if negative:
        back = ctx.int_attr(name, 1, 64)
        return -back, n - back
    pos = ctx.int_attr(name, 0, 63)
    return pos, pos


class Narrow(ShapeOp):
    """torch.narrow(x, dim, start, length), start sometimes negative."""

    name = "narrow"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        n = x.shape[axis]
        start, first = signed_index(ctx, "start", n, ctx.choice("negative", (False, False, True)))
        length = ctx.int_attr("length", 1, 64)
        shape = x.shape[:axis] + (length,) + x.shape[axis + 1:]
        return one(shape, x.dtype, [first >= 0, first + length <= n], dim=dim, start=start, length=length)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.narrow(x, attrs["dim"], attrs["start"], attrs["length"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.narrow", args, attrs["dim"], attrs["start"], attrs["length"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        start, stop = attrs["start"], attrs["start"] + attrs["length"]
        return index_source(args[0], attrs["dim"], f"{start}:{'' if start < 0 <= stop else stop}")

    onnx_since = 10  # starts, ends, axes and steps as inputs

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        axis = axis_of(attrs["dim"], call.rank)
        start = attrs["start"] % call.in_types[0].shape[axis]
        call.node("Slice", [call.inputs[0], call.ints([start]), call.ints([start + attrs["length"]]),
                            call.ints([axis])], call.outputs)
        return call.nodes


class Slice(ShapeOp):
    """x[:, a:b:s] written as Python indexing; bounds may be omitted, negative, or past the end."""

    name = "slice"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        axis = ctx.choice("axis", range(x.rank))
        n = x.shape[axis]
        reqs = []
        start, first = None, z3.IntVal(0)
        kind = ctx.choice("start_kind", ("none", "pos", "pos", "neg"))
        if kind != "none":
            start, first = signed_index(ctx, "start", n, kind == "neg")
            reqs.append(first >= 0)
        stop, end = None, n
        kind = ctx.choice("stop_kind", ("none", "pos", "pos", "neg", "past_end"))
        if kind == "past_end":
            stop = ctx.choice("stop", (64, 1000, 2**31 - 1, 2**63 - 1))
        elif kind != "none":
            stop, end = signed_index(ctx, "stop", n, kind == "neg")
            reqs.append(end <= n)
        step = ctx.choice("step", (1, 1, 2, 3, 4, 7))
        reqs.append(end > first)
        shape = x.shape[:axis] + ((end - first + step - 1) / step,) + x.shape[axis + 1:]
        # Indexing from the back (x[..., a:b]) for trailing axes, as models often write it.
        from_back = ctx.choice("ellipsis", (False, True))
        return one(shape, x.dtype, reqs, axis=axis - x.rank if from_back else axis, start=start, stop=stop, step=step)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        window = slice(attrs["start"], attrs["stop"], attrs["step"])
        axis = attrs["axis"]
        if axis < 0:
            return x[(Ellipsis, window) + (slice(None),) * (-axis - 1)]
        return x[(slice(None),) * axis + (window,)]

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
        window = f"{'' if start is None else literal(start)}:{'' if stop is None else literal(stop)}"
        return index_source(args[0], attrs["axis"], window if step == 1 else f"{window}:{literal(step)}")

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return self.torch_source(attrs, args)  # Python slicing reads the same on a tf.Tensor

    onnx_since = 10

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # ONNX's Slice clamps its bounds as Python's slicing does (negative ones count from the end).
        start = 0 if attrs["start"] is None else attrs["start"]
        stop = INT64_MAX if attrs["stop"] is None else attrs["stop"]
        bounds = [call.ints([start]), call.ints([stop]), call.ints([axis_of(attrs["axis"], call.rank)])]
        call.node("Slice", [call.inputs[0], *bounds, call.ints([attrs["step"]])], call.outputs)
        return call.nodes


class Select(ShapeOp):
    """x[:, i] / x.select(dim, i): integer indexing that drops a dim; the index is sometimes negative."""

    name = "select"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        axis = norm_axis(dim, x.rank)
        n = x.shape[axis]
        index, pos = signed_index(ctx, "index", n, ctx.choice("negative", (False, True)))
        shape = x.shape[:axis] + x.shape[axis + 1:]
        return one(shape, x.dtype, [pos >= 0, pos < n], dim=dim, index=index,
                   indexing=ctx.choice("indexing", (False, True)))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        if not attrs["indexing"]:
            return x.select(attrs["dim"], attrs["index"])
        dim = attrs["dim"]
        if dim < 0:
            return x[(Ellipsis, attrs["index"]) + (slice(None),) * (-dim - 1)]
        return x[(slice(None),) * dim + (attrs["index"],)]

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if not attrs["indexing"]:
            return method(args[0], "select", attrs["dim"], attrs["index"])
        return index_source(args[0], attrs["dim"], literal(attrs["index"]))

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return index_source(args[0], attrs["dim"], literal(attrs["index"]))

    onnx_since = 13

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # Gather with a scalar index drops the axis, and counts a negative index from the end.
        index = call.const(attrs["index"], DType.INT64)
        call.node("Gather", [call.inputs[0], index], call.outputs, axis=axis_of(attrs["dim"], call.rank))
        return call.nodes


class Pad(ShapeOp):
    """F.pad(x, pad, mode, value) over 1-3 trailing dims; each mode has its own rank and size rules."""

    mode = "constant"

    def padded_dims(self, ctx: BuildContext, rank: int) -> int | None:
        """How many trailing dims to pad; reflect/replicate/circular need 1-2 leading (batch, channel) dims."""
        counts = [k for k in (1, 2, 3) if rank - 2 <= k <= rank - 1]
        return ctx.choice("padded", counts) if counts else None

    def pad_limit(self, n: Dim, left: Dim, right: Dim) -> list[z3.BoolRef]:
        # Negative pads crop the input first, and that crop must leave something.
        return [n + z3.If(left < 0, left, 0) + z3.If(right < 0, right, 0) >= 1]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        count = self.padded_dims(ctx, x.rank)
        if count is None:
            return None
        lo = -8 if self.mode == "constant" else 0
        pad, reqs, shape = [], [], list(x.shape)
        for i in range(count):  # the pad list starts at the last dim
            n = x.shape[x.rank - 1 - i]
            left, right = ctx.int_attr(f"pad{i}_left", lo, 8), ctx.int_attr(f"pad{i}_right", lo, 8)
            pad += [left, right]
            reqs += self.pad_limit(n, left, right)
            shape[x.rank - 1 - i] = n + left + right
        attrs = {"pad": tuple(pad), "mode": self.mode}
        if self.mode == "constant":
            attrs["value"] = fill_value(ctx, x.dtype)
        return one(shape, x.dtype, reqs, **attrs)

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        return (pad_feature(attrs["mode"], ranks[0], len(attrs["pad"]) // 2),)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        if attrs["mode"] == "constant":
            return F.pad(x, attrs["pad"], mode="constant", value=attrs["value"])
        return F.pad(x, attrs["pad"], mode=attrs["mode"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if attrs["mode"] == "constant":
            return call("torch.nn.functional.pad", args, attrs["pad"], mode="constant", value=attrs["value"])
        return call("torch.nn.functional.pad", args, attrs["pad"], mode=attrs["mode"])

    # tf.pad's modes are constant, REFLECT and SYMMETRIC: replicate and circular have no counterpart.
    tf_mode: ClassVar[bool] = True

    def has_tf_source(self) -> bool:
        return self.tf_mode

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return trailing_pads(args[0], attrs["pad"], attrs.get("value"), attrs["mode"]) if self.tf_mode else None

    onnx_since = 11  # pads (negative ones crop) and the constant as inputs
    onnx_mode: ClassVar[str] = "constant"  # ONNX's name of the mode: edge for replicate, wrap for circular

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        pads = onnx_pads(attrs["pad"], call.rank)
        value = [call.const(attrs["value"], call.dtype)] if attrs["mode"] == "constant" else []
        call.node("Pad", [call.inputs[0], call.ints(pads), *value], call.outputs, mode=self.onnx_mode)
        return call.nodes


def pad_feature(mode: str, rank: int, dims: int) -> str:
    """The feature of an F.pad call: its mode, the input's rank and how many trailing dims it pads. Converters
    translate each mode per rank and count (torch.onnx's TorchScript export of a circular pad of two dims of a
    rank-3 tensor corrupts the heap, while those of ranks 2, 4 and 5 convert)."""
    return f"pad:{mode}:rank{rank}:dims{dims}"


def onnx_pads(pad: Sequence[int], rank: int) -> list[int]:
    """F.pad's (last dim first, begin and end) pads as ONNX's: every axis's begin, then every axis's end."""
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return begins + ends


class PadConstant(Pad):
    preserves_values = False
    emits_zeros = True
    """Constant padding: any rank, negative pads crop."""

    name = "pad_constant"
    ranks = (POS_RANK,)

    def padded_dims(self, ctx: BuildContext, rank: int) -> int | None:
        return ctx.choice("padded", range(1, min(3, rank) + 1))


class PadReflect(Pad):
    name = "pad_reflect"
    mode = onnx_mode = "reflect"
    sigs = same_sigs(ALL[:-1])  # no bool kernel
    ranks = ((2, 3, 4, 5),)

    def pad_limit(self, n: Dim, left: Dim, right: Dim) -> list[z3.BoolRef]:
        return [left < n, right < n]


class PadReplicate(Pad):
    name = "pad_replicate"
    tf_mode = False
    mode, onnx_mode = "replicate", "edge"
    sigs = same_sigs(ALL[:-1])  # no bool kernel
    ranks = ((2, 3, 4, 5),)


class PadCircular(Pad):
    name = "pad_circular"
    tf_mode = False
    mode, onnx_mode = "circular", "wrap"
    onnx_since = 19
    ranks = ((2, 3, 4, 5),)

    def pad_limit(self, n: Dim, left: Dim, right: Dim) -> list[z3.BoolRef]:
        return [left <= n, right <= n]


# ---- repetition and reordering ------------------------------------------------------------------

class Tile(ShapeOp):
    """torch.tile(x, reps): reps shorter than the rank pad with ones, longer ones add leading dims."""

    name = "tile"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        length = ctx.choice("length", range(max(1, x.rank - 1), min(x.rank + 1, MAX_RANK) + 1))
        return self.tiled(ctx, x, length)

    def tiled(self, ctx: BuildContext, x: SymTensor, length: int) -> Build:
        reps = [ctx.int_attr(f"rep{i}", 1, 4) for i in range(length)]
        rank = max(length, x.rank)
        dims = [z3.IntVal(1)] * (rank - x.rank) + list(x.shape)
        factors = [1] * (rank - length) + reps
        return one([d * f for d, f in zip(dims, factors, strict=True)], x.dtype, reps=tuple(reps))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.tile(x, attrs["reps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.tile", args, attrs["reps"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call(f"{TNP}.tile", args, attrs["reps"])  # numpy's tile pads reps or dims with leading 1s

    onnx_since = 6

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # Short reps are padded with leading ones; long ones give the input leading ones first.
        reps, x = list(attrs["reps"]), call.inputs[0]
        if len(reps) > call.rank:
            x = call.reshape(x, [1] * (len(reps) - call.rank) + list(call.in_types[0].shape))
        reps = [1] * (call.rank - len(reps)) + reps
        call.node("Tile", [x, call.ints(reps)], call.outputs)
        return call.nodes


class Repeat(Tile):
    """x.repeat(*sizes): like tile but sizes must cover every dim."""

    name = "repeat"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return self.tiled(ctx, x, ctx.choice("length", range(max(1, x.rank), MAX_RANK + 1)))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(*attrs["reps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return method(args[0], "repeat", *attrs["reps"])


def pick_axes(ctx: BuildContext, rank: int) -> tuple[int, ...]:
    """A non-empty set of distinct axes in random order, some written negative."""
    axes = ctx.rng.sample(range(rank), ctx.choice("count", range(1, rank + 1)))
    return tuple(a - rank if ctx.choice(f"neg{i}", (False, True)) else a for i, a in enumerate(axes))


class Flip(ShapeOp):
    """torch.flip(x, dims)."""

    name = "flip"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return one(x.shape, x.dtype, dims=pick_axes(ctx, x.rank))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.flip(x, attrs["dims"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.flip", args, attrs["dims"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call("tf.reverse", args, axis=attrs["dims"])

    onnx_since = 10

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # Each axis read backwards: from the last element down past the first, step -1.
        axes = sorted({axis_of(d, call.rank) for d in attrs["dims"]})
        count = len(axes)
        bounds = [call.ints([-1] * count), call.ints([INT64_MIN] * count), call.ints(axes), call.ints([-1] * count)]
        call.node("Slice", [call.inputs[0], *bounds], call.outputs)
        return call.nodes


class Roll(ShapeOp):
    """torch.roll(x, shifts, dims): per-axis shifts (negative, or past the size), or a roll of the flat tensor."""

    name = "roll"
    ranks = (POS_RANK,)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        if ctx.choice("flat", (False, False, True)):
            return one(x.shape, x.dtype, shifts=ctx.int_attr("shift", -100, 100), dims=None)
        dims = pick_axes(ctx, x.rank)
        shifts = tuple(ctx.int_attr(f"shift{i}", -80, 80) for i in range(len(dims)))
        return one(x.shape, x.dtype, shifts=shifts, dims=dims)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.roll(x, attrs["shifts"], attrs["dims"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if attrs["dims"] is None:
            return call("torch.roll", args, attrs["shifts"])
        return call("torch.roll", args, attrs["shifts"], attrs["dims"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x = args[0]
        if attrs["dims"] is None:  # torch rolls the flattened tensor
            return f"tf.reshape(tf.roll(tf.reshape({x}, [-1]), {attrs['shifts']}, axis=0), tf.shape({x}))"
        return tf_call("tf.roll", args, shift=attrs["shifts"], axis=attrs["dims"])


class Rot90(ShapeOp):
    """torch.rot90(x, k, dims): odd k swaps the two dims."""

    name = "rot90"
    ranks = ((2, 3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        d0, d1 = ctx.choice("dims", list(itertools.permutations(range(x.rank), 2)))
        k = ctx.choice("k", (-3, -2, -1, 0, 1, 2, 3, 4, 5))
        shape = list(x.shape)
        if k % 2:
            shape[d0], shape[d1] = shape[d1], shape[d0]
        if ctx.choice("negative", (False, True)):
            d0 -= x.rank
        return one(shape, x.dtype, k=k, dims=(d0, d1))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.rot90(x, attrs["k"], attrs["dims"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.rot90", args, attrs["k"], attrs["dims"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call(f"{TNP}.rot90", args, attrs["k"], axes=attrs["dims"])


# ---- triangles and diagonals ----------------------------------------------------------------------

class Tril(ShapeOp):
    emits_zeros = True
    """torch.tril(x, diagonal) over the last two dims."""

    name = "tril"
    ranks = ((2, 3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return one(x.shape, x.dtype, diagonal=ctx.int_attr("diagonal", -10, 10))

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.tril(x, attrs["diagonal"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.tril", args, attrs["diagonal"])

    tf_types = TF_NUMERIC  # numpy's tril/triu have no bool kernel in TensorFlow

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call(f"{TNP}.{self.name}", args, attrs["diagonal"])

    onnx_since = 14
    onnx_types = ORT_NUMERIC | {DType.BOOL}  # no 8-bit kernels of Trilu
    upper: ClassVar[int] = 0

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        diagonal = call.const(attrs["diagonal"], DType.INT64)
        call.node("Trilu", [call.inputs[0], diagonal], call.outputs, upper=self.upper)
        return call.nodes


class Triu(Tril):
    """torch.triu(x, diagonal) over the last two dims."""

    name = "triu"
    upper = 1

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.triu(x, attrs["diagonal"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.triu", args, attrs["diagonal"])


class Diagonal(ShapeOp):
    """torch.diagonal(x, offset, dim1, dim2): both dims go, the diagonal becomes the last dim."""

    name = "diagonal"
    ranks = ((2, 3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        d1, d2 = ctx.choice("dims", list(itertools.permutations(range(x.rank), 2)))
        offset = ctx.int_attr("offset", -8, 8)
        a, b = x.shape[d1], x.shape[d2]
        # A positive offset moves right along dim2, a negative one down along dim1.
        rows, cols = z3.If(offset >= 0, a, a + offset), z3.If(offset >= 0, b - offset, b)
        shape = [d for i, d in enumerate(x.shape) if i not in (d1, d2)] + [z3.If(rows < cols, rows, cols)]
        if ctx.choice("negative", (False, True)):
            d2 -= x.rank
        return one(shape, x.dtype, offset=offset, dim1=d1, dim2=d2)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.diagonal(x, attrs["offset"], attrs["dim1"], attrs["dim2"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.diagonal", args, offset=attrs["offset"], dim1=attrs["dim1"], dim2=attrs["dim2"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return tf_call(f"{TNP}.diagonal", args, offset=attrs["offset"], axis1=attrs["dim1"], axis2=attrs["dim2"])


# ---- scans --------------------------------------------------------------------------------------

# Integer and bool scans accumulate in int64.
SCAN_SIGS = tuple(Sig((d,), d) for d in FLOATS) + tuple(Sig((d,), DType.INT64) for d in INTS + (DType.BOOL,))


class Cumsum(ShapeOp):
    """torch.cumsum(x, dim)."""
    preserves_values = False

    name = "cumsum"
    sigs = SCAN_SIGS
    fn = staticmethod(torch.cumsum)

    def out_dtype(self, dtype: DType) -> DType:
        return dtype if dtype.is_float else DType.INT64

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, max(x.rank, 1))
        return one(x.shape, self.out_dtype(x.dtype), dim=dim)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args, attrs["dim"])

    # torch scans float16/bfloat16 in float32, TensorFlow in the half type itself (cumsum then differs by ~1e-1).
    tf_types = TF_ALL - {DType.FLOAT16, DType.BFLOAT16}

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x = args[0]
        scan = f"tf.math.{self.name}({INT64_OPERAND.format(x=x)}, axis={attrs['dim']})"
        # A scalar's scan is the scalar (in int64 for ints), where TensorFlow wants an axis.
        return f"({INT64_OPERAND.format(x=x)} if len({x}.shape) == 0 else {scan})"

    onnx_since = 11
    # Integers and bools accumulate in int64 (cast first); CumSum has a float16 kernel only from opset 14.
    onnx_types = frozenset({DType.FLOAT32, DType.FLOAT64, DType.BOOL, *INTS})

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if not call.rank:
            return None  # ONNX's CumSum needs an axis
        x = call.inputs[0]
        if not call.dtype.is_float:
            x = call.node("Cast", [x], to=onnx.TensorProto.INT64)
        axis = call.const(axis_of(attrs["dim"], call.rank), DType.INT64)
        call.node("CumSum", [x, axis], call.outputs)
        return call.nodes


class Cumprod(Cumsum):
    """torch.cumprod(x, dim): running products must stay finite (floats) and inside int64 (ints)."""

    name = "cumprod"
    fn = staticmethod(torch.cumprod)
    onnx_since = None  # ONNX has no CumProd

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        if x.dim() == 0:
            return None
        # log|running product| must stay below the dtype's limit (int64 for ints), with margin.
        limit = finite_max(DType.from_torch(x.dtype)) if x.is_floating_point() else 2.0**62
        logs = torch.cumsum(torch.log(x.double().abs() + 1e-3), dim=attrs["dim"])
        excess = torch.relu(logs - (torch.log(torch.tensor(limit, dtype=torch.float64)) - 2.0)).sum()
        return excess.float() if x.is_floating_point() else (excess > 0).float()


class Cummax(ShapeOp):
    """torch.cummax(x, dim): running maximum values and their indices (two outputs)."""

    name = "cummax"
    fn = staticmethod(torch.cummax)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, max(x.rank, 1))
        return Build([SymTensor(x.shape, x.dtype), SymTensor(x.shape, DType.INT64)], [], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(type(self).fn(x, attrs["dim"]))

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return f"tuple({call(function_source(type(self).fn), args, attrs['dim'])})"


class Cummin(Cummax):
    name = "cummin"
    fn = staticmethod(torch.cummin)


OPS: list[type[OpSpec]] = [
    Reshape, View, Unflatten, Flatten,
    Transpose, T, Permute, Movedim,
    Squeeze, Unsqueeze, Expand, BroadcastTo,
    Cat, Cat3, Stack, Stack3, Split, Chunk, TensorSplit, Unbind,
    Narrow, Slice, Select, PadConstant, PadReflect, PadReplicate, PadCircular,
    Tile, Repeat, Flip, Roll, Rot90,
    Tril, Triu, Diagonal,
    Cumsum, Cumprod, Cummax, Cummin,
]
