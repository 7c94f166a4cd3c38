"""Reductions over chosen dims (single, several, negative, or all), with keepdim varied."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import onnx
import torch
import z3

from generators.dtypes import ALL, FLOATS, INTS, NUMERIC, DType
from generators.ops.base import (
    ANY_RANK,
    INTS_PROMOTE,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    call,
    finite_max,
    function_source,
    norm_axis,
    pick_axis,
    same_sigs,
)
from generators.ops.discontinuity import IndexTie, MinMax
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC, OnnxCall
from generators.ops.tf_sources import INT64_OPERAND, TF_ALL, TF_NUMERIC, tf_axes
from generators.ops.ties import settle_tied_indices

TINY = 1e-3
Dims = int | tuple[int, ...] | None
# ONNX Runtime's ReduceMax/ReduceMin and ArgMax/ArgMin take the 8-bit integers too (bool only from opset 20).
ORT_ORDERED = ORT_NUMERIC | {DType.INT8, DType.UINT8}
# Sums and products of integers and bools accumulate in int64 in torch: their counterparts cast to int64 first.
ORT_WIDENED = ORT_FLOATS | frozenset(INTS) | {DType.BOOL}


def pick_dims(ctx: BuildContext, rank: int, multi: bool, full: bool) -> Dims:
    """The `dim` argument: None (all), one axis, or (multi) a tuple of distinct axes in random order."""
    if rank == 0:
        return None if full else ctx.choice("dim", (0, -1))
    if full and ctx.choice("full", (False, False, False, True)):
        return None
    if not multi:
        return pick_axis(ctx, rank)
    count = ctx.choice("count", range(1, rank + 1))
    if count == 1 and ctx.choice("as_int", (False, True)):
        return pick_axis(ctx, rank)
    axes = ctx.rng.sample(range(rank), count)
    return tuple(a - rank if ctx.choice("negative", (False, False, True)) else a for a in axes)


def reduced_axes(dim: Dims, rank: int) -> tuple[int, ...]:
    """The non-negative axes a `dim` argument reduces."""
    if dim is None:
        return tuple(range(rank))
    if rank == 0:
        return ()
    dims = (dim,) if isinstance(dim, int) else dim
    return tuple(sorted(d % rank for d in dims))


def reduced_shape(shape: tuple, axes: tuple[int, ...], keepdim: bool) -> tuple:
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdim or i not in axes)


class Reduce(OpSpec):
    """A reduction `fn(x, dim, keepdim, attrs)`; subclasses say which `dim` forms the call accepts."""

    family = "reduce"
    ranks = (ANY_RANK,)
    multi: ClassVar[bool] = True  # dim may be a tuple of axes
    full: ClassVar[bool] = True  # dim=None (everything) is accepted
    full_keepdim: ClassVar[bool] = True  # keepdim is accepted together with dim=None
    has_keepdim: ClassVar[bool] = True
    extra_outs: ClassVar[tuple[DType | None, ...]] = ()  # None: the input's dtype
    # The public torch function the op calls, for torch_source.
    torch_fn: ClassVar[Callable[..., Any]]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build | None:
        dim = pick_dims(ctx, x.rank, self.multi, self.full)
        keepdim = self.has_keepdim and ctx.choice("keepdim", (False, True))
        if dim is None and not self.full_keepdim:
            keepdim = False
        axes = reduced_axes(dim, x.rank)
        options = self.options(ctx, x, axes)
        if options is None:
            return None
        attrs, reqs = options
        shape = reduced_shape(x.shape, axes, keepdim)
        first = self.out_dtypes_for((x.dtype,))[0].out
        outs = [SymTensor(shape, first)] + [SymTensor(shape, d or x.dtype) for d in self.extra_outs]
        return Build(outs, reqs, {"dim": dim, "keepdim": keepdim, **attrs})

    def options(self, ctx: BuildContext, x: SymTensor, axes: tuple[int, ...]) -> tuple[dict, list] | None:
        """Op-specific attributes and requirements (None declines)."""
        return {}, []

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> Any:
        return self.fn(x, attrs["dim"], attrs["keepdim"], attrs)

    def fn(self, x: torch.Tensor, dim: Dims, keepdim: bool, attrs: AttrMap) -> Any:
        raise NotImplementedError

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).torch_fn), args, **self.source_kwargs(attrs))

    def source_kwargs(self, attrs: AttrMap) -> dict[str, Any]:
        """The keyword arguments of the call, as `fn` passes them."""
        return {"dim": attrs["dim"], "keepdim": attrs["keepdim"]}

    # The ONNX Reduce* computing the op (None: see onnx_nodes), from which opset it takes its axes as an input
    # (ReduceSum from 13, the others from 18), and whether integers and bools are cast to int64 first.
    onnx_op: ClassVar[str | None] = None
    onnx_axes_input_since: ClassVar[int] = 18
    onnx_widen: ClassVar[bool] = False
    # The TensorFlow reduction computing the op (tf.math.reduce_sum ...), and a template over {x} for its operand
    # (the cast that torch's integer sums make); None: none does.
    tf_reduce: ClassVar[str | None] = None
    tf_operand: ClassVar[str] = "{x}"

    def has_tf_source(self) -> bool:
        return self.tf_reduce is not None

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        if self.tf_reduce is None:
            return None
        (x,) = args
        axis = tf_axes(x, attrs["dim"])
        keep = f", keepdims={attrs['keepdim']}" if self.has_keepdim else ""
        return f"{self.tf_reduce}({self.tf_operand.format(x=x)}, axis={axis}{keep})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if self.onnx_op is None:
            return None
        x = call.inputs[0]
        if self.onnx_widen and not call.dtype.is_float:
            x = call.node("Cast", [x], to=onnx.TensorProto.INT64)
        axes = None if attrs["dim"] is None else reduced_axes(attrs["dim"], call.rank)
        call.reduce(self.onnx_op, x, axes, attrs["keepdim"], call.outputs[0], self.onnx_axes_input_since)
        return call.nodes


def _to_int64(dtypes) -> tuple[Sig, ...]:
    return tuple(Sig((d,), DType.INT64) for d in dtypes)


class Sum(Reduce):
    name = "sum"
    torch_fn = staticmethod(torch.sum)
    sigs = same_sigs(FLOATS) + _to_int64(INTS + (DType.BOOL,))  # integer sums accumulate in int64
    onnx_op, onnx_axes_input_since, onnx_widen = "ReduceSum", 13, True
    onnx_since, onnx_types = 1, ORT_WIDENED

    tf_reduce, tf_operand, tf_types = "tf.math.reduce_sum", INT64_OPERAND, TF_ALL

    def fn(self, x, dim, keepdim, attrs):
        return torch.sum(x, dim=dim, keepdim=keepdim)


class Mean(Reduce):
    name = "mean"
    torch_fn = staticmethod(torch.mean)
    sigs = same_sigs(FLOATS)
    onnx_op, onnx_since, onnx_types = "ReduceMean", 1, ORT_FLOATS

    tf_reduce = "tf.math.reduce_mean"

    def fn(self, x, dim, keepdim, attrs):
        return torch.mean(x, dim=dim, keepdim=keepdim)


class Amax(Reduce):
    name = "amax"
    torch_fn = staticmethod(torch.amax)
    sigs = same_sigs(ALL)
    onnx_op, onnx_since, onnx_types = "ReduceMax", 1, ORT_ORDERED

    tf_reduce, tf_types = "tf.math.reduce_max", TF_NUMERIC

    def fn(self, x, dim, keepdim, attrs):
        return torch.amax(x, dim=() if dim is None else dim, keepdim=keepdim)

    def source_kwargs(self, attrs):
        return {"dim": () if attrs["dim"] is None else attrs["dim"], "keepdim": attrs["keepdim"]}


class Amin(Amax):
    name = "amin"
    torch_fn = staticmethod(torch.amin)
    onnx_op = "ReduceMin"

    tf_reduce = "tf.math.reduce_min"

    def fn(self, x, dim, keepdim, attrs):
        return torch.amin(x, dim=() if dim is None else dim, keepdim=keepdim)


class Prod(Reduce):
    """torch.prod takes one dim, or none at all (then without keepdim); floats are kept from overflowing."""

    name = "prod"
    torch_fn = staticmethod(torch.prod)
    sigs = same_sigs(FLOATS) + _to_int64(INTS + (DType.BOOL,))
    multi = False
    full_keepdim = False
    onnx_op, onnx_widen, onnx_since, onnx_types = "ReduceProd", True, 1, ORT_WIDENED

    tf_reduce, tf_operand, tf_types = "tf.math.reduce_prod", INT64_OPERAND, TF_ALL

    def fn(self, x, dim, keepdim, attrs):
        return torch.prod(x) if dim is None else torch.prod(x, dim=dim, keepdim=keepdim)

    def source_kwargs(self, attrs):
        return {} if attrs["dim"] is None else super().source_kwargs(attrs)

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        if not x.is_floating_point():
            return None  # int64 products wrap, identically in every runtime
        bound = math.log(finite_max(DType.from_torch(x.dtype))) - 1.0
        logs = torch.log(x.float().abs() + TINY)
        axes = reduced_axes(attrs["dim"], x.dim())
        magnitude = logs.sum(dim=axes) if axes else logs
        return torch.relu(magnitude - bound).sum()


class IndexReduce(Reduce):
    """A reduction with an index output, its last (argmax's only, max(dim)'s second)."""

    settles_output = True

    def canonical_output(self, attrs: AttrMap, index: int, value: np.ndarray,
                         inputs: Sequence[np.ndarray]) -> np.ndarray:
        """torch names the first of tied extremes, but a tie in the float32 source is one rounding away from none
        in a converted model: any index of the extreme value is accepted (settled to the first)."""
        if index != len(self.extra_outs) or inputs[0].ndim == 0:
            return value
        return settle_tied_indices(inputs[0], value, attrs["dim"], attrs["keepdim"])


class Argmax(IndexReduce):
    emits_zeros = True  # index 0 is a likely answer whatever the values
    name = "argmax"
    torch_fn = staticmethod(torch.argmax)
    sigs = _to_int64(NUMERIC)
    multi = False
    discontinuity = IndexTie(True)
    onnx_op, onnx_since, onnx_types = "ArgMax", 1, ORT_ORDERED  # the first of tied extremes, as torch

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, (out,) = call.inputs[0], call.outputs
        keep = int(attrs["keepdim"])
        if attrs["dim"] is not None and call.rank:
            call.node(self.onnx_op, [x], [out], axis=norm_axis(attrs["dim"], call.rank), keepdims=keep)
            return call.nodes
        # No dim: the index into the flattened input, shaped [1] * rank with keepdim.
        flat = call.node(self.onnx_op, [call.reshape(x, [-1])], None if keep else [out], axis=0, keepdims=0)
        if keep:
            call.reshape(flat, [1] * call.rank, out)
        return call.nodes

    def fn(self, x, dim, keepdim, attrs):
        return torch.argmax(x, dim=dim, keepdim=keepdim)


class Argmin(Argmax):
    name = "argmin"
    torch_fn = staticmethod(torch.argmin)
    discontinuity = IndexTie(False)
    onnx_op = "ArgMin"

    def fn(self, x, dim, keepdim, attrs):
        return torch.argmin(x, dim=dim, keepdim=keepdim)


class MaxDim(IndexReduce):
    """torch.max(x, dim) -> (values, indices)."""

    name = "max"
    torch_fn = staticmethod(torch.max)
    sigs = same_sigs(ALL)
    multi = False
    full = False
    extra_outs = (DType.INT64,)
    discontinuity = MinMax(True)
    onnx_op, onnx_since, onnx_types = "ReduceMax", 1, ORT_ORDERED
    onnx_index_op: ClassVar[str] = "ArgMax"

    def fn(self, x, dim, keepdim, attrs):
        return tuple(torch.max(x, dim=dim, keepdim=keepdim))

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if not call.rank:
            return None  # a scalar has no axis to reduce in ONNX
        (x,), (values, indices) = call.inputs, call.outputs
        axis = norm_axis(attrs["dim"], call.rank)
        call.reduce(self.onnx_op, x, [axis], attrs["keepdim"], values)
        call.node(self.onnx_index_op, [x], [indices], axis=axis, keepdims=int(attrs["keepdim"]))
        return call.nodes

    def torch_source(self, attrs, args):
        return f"tuple({super().torch_source(attrs, args)})"


class MinDim(MaxDim):
    name = "min"
    torch_fn = staticmethod(torch.min)
    discontinuity = MinMax(False)
    onnx_op, onnx_index_op = "ReduceMin", "ArgMin"

    def fn(self, x, dim, keepdim, attrs):
        return tuple(torch.min(x, dim=dim, keepdim=keepdim))


class LogSumExp(Reduce):
    name = "logsumexp"
    torch_fn = staticmethod(torch.logsumexp)
    sigs = same_sigs(FLOATS)
    dtype_exclusions = INTS_PROMOTE
    # float16 left out: torch subtracts the maximum before exp, ONNX Runtime's half kernel may overflow.
    onnx_op, onnx_since, onnx_types = "ReduceLogSumExp", 1, frozenset({DType.FLOAT32, DType.FLOAT64})
    full = False  # torch.logsumexp requires dim

    tf_reduce = "tf.math.reduce_logsumexp"

    def fn(self, x, dim, keepdim, attrs):
        return torch.logsumexp(x, dim=dim, keepdim=keepdim)


class Var(Reduce):
    """torch.var with correction 0 or 1; correction 1 needs at least two reduced elements."""

    name = "var"
    torch_fn = staticmethod(torch.var)
    sigs = same_sigs(FLOATS)

    def options(self, ctx, x, axes):
        correction = ctx.choice("correction", (0, 1)) if axes else 0
        reqs = [z3.Or(*[x.shape[a] >= 2 for a in axes])] if correction else []
        return {"correction": correction}, reqs

    def fn(self, x, dim, keepdim, attrs):
        return torch.var(x, dim=dim, correction=attrs["correction"], keepdim=keepdim)

    def source_kwargs(self, attrs):
        return {"dim": attrs["dim"], "correction": attrs["correction"], "keepdim": attrs["keepdim"]}


class Std(Var):
    name = "std"
    torch_fn = staticmethod(torch.std)

    def fn(self, x, dim, keepdim, attrs):
        return torch.std(x, dim=dim, correction=attrs["correction"], keepdim=keepdim)


class VarMean(Var):
    name = "var_mean"
    torch_fn = staticmethod(torch.var_mean)
    extra_outs = (None,)

    def fn(self, x, dim, keepdim, attrs):
        return torch.var_mean(x, dim=dim, correction=attrs["correction"], keepdim=keepdim)


class StdMean(Var):
    name = "std_mean"
    torch_fn = staticmethod(torch.std_mean)
    extra_outs = (None,)

    def fn(self, x, dim, keepdim, attrs):
        return torch.std_mean(x, dim=dim, correction=attrs["correction"], keepdim=keepdim)


class Norm(Reduce):
    """torch.linalg.vector_norm; ord is stored as a number or the strings "inf"/"-inf" (JSON has no inf)."""

    name = "norm"
    sigs = same_sigs(FLOATS)

    def options(self, ctx, x, axes):
        return {"ord": ctx.choice("ord", (2, 2, 1, 3, "inf", "-inf"))}, []

    def fn(self, x, dim, keepdim, attrs):
        return torch.linalg.vector_norm(x, ord=float(attrs["ord"]), dim=dim, keepdim=keepdim)

    def torch_source(self, attrs, args):
        # torch.linalg.vector_norm's __name__ is linalg_vector_norm, so function_source cannot find it.
        return call("torch.linalg.vector_norm", args, ord=float(attrs["ord"]), **self.source_kwargs(attrs))

    onnx_since, onnx_types = 1, ORT_FLOATS
    # ord 1 and 2 are ReduceL1/ReduceL2; +-inf the largest or smallest magnitude; other orders have no counterpart.
    ONNX_ORDS: ClassVar[Mapping[Any, tuple[str, bool]]] = {
        1: ("ReduceL1", False), 2: ("ReduceL2", False), "inf": ("ReduceMax", True), "-inf": ("ReduceMin", True)}

    def onnx_nodes(self, attrs, call):
        if attrs["ord"] not in self.ONNX_ORDS:
            return None
        op_type, of_abs = self.ONNX_ORDS[attrs["ord"]]
        x = call.node("Abs", call.inputs) if of_abs else call.inputs[0]
        axes = None if attrs["dim"] is None else reduced_axes(attrs["dim"], call.rank)
        call.reduce(op_type, x, axes, attrs["keepdim"], call.outputs[0])
        return call.nodes


class Any_(Reduce):
    emits_zeros = True  # False (0) is a likely answer whatever the values
    name = "any"
    torch_fn = staticmethod(torch.any)
    # uint8 keeps its dtype in torch.any/all (a legacy rule converters may miss).
    sigs = tuple(Sig((d,), DType.UINT8 if d is DType.UINT8 else DType.BOOL) for d in ALL)

    # torch keeps uint8 for a uint8 input, which TensorFlow's bool reductions cannot.
    tf_reduce, tf_operand, tf_types = "tf.math.reduce_any", "tf.cast({x}, tf.bool)", TF_ALL - {DType.UINT8}

    def fn(self, x, dim, keepdim, attrs):
        return torch.any(x, dim=dim, keepdim=keepdim)


class All(Any_):
    name = "all"
    torch_fn = staticmethod(torch.all)

    tf_reduce = "tf.math.reduce_all"

    def fn(self, x, dim, keepdim, attrs):
        return torch.all(x, dim=dim, keepdim=keepdim)


class CountNonzero(Reduce):
    emits_zeros = True  # a count of 0 is a likely answer whatever the values
    name = "count_nonzero"
    torch_fn = staticmethod(torch.count_nonzero)
    sigs = _to_int64(ALL)
    has_keepdim = False

    tf_reduce, tf_types = "tf.math.count_nonzero", TF_ALL

    def fn(self, x, dim, keepdim, attrs):
        return torch.count_nonzero(x, dim=dim)

    def source_kwargs(self, attrs):
        return {"dim": attrs["dim"]}


OPS: list[type[OpSpec]] = [
    Sum, Mean, Amax, Amin, Prod, Argmax, Argmin, MaxDim, MinDim, LogSumExp,
    Var, Std, VarMean, StdMean, Norm, Any_, All, CountNonzero,
]
