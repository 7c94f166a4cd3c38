"""Comparisons, logical ops, where, clamp and the float predicates (isnan, isinf, ...): mostly bool outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import onnx
import torch

from generators.dtypes import ALL, FLOATS, INTS, SIGNED_INTS, DType
from generators.ops.base import (
    ANY_RANK,
    CONSTANT,
    AttrMap,
    BroadcastBinary,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    broadcast_where,
    call,
    excluded,
    function_source,
)
from generators.ops.discontinuity import Detector, Thresholds, comparison, sign_bit
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC, OnnxCall, elementwise
from generators.ops.tf_sources import TF_ALL, TF_NUMERIC, like, nan_through

# ONNX Runtime's comparisons and Where take every numeric dtype but bfloat16; Equal takes bool too.
ORT_COMPARABLE = ORT_NUMERIC | {DType.INT8, DType.UINT8}
NEVER_NAN = excluded((*INTS, DType.BOOL), CONSTANT)  # isnan, isinf, ... of an integer
ORT_FLOAT_TESTS = frozenset({DType.FLOAT32, DType.FLOAT64})  # IsInf has a float16 kernel only from opset 20


class Compare(BroadcastBinary):
    """Two inputs of one dtype, broadcast together; the output is bool."""

    family = "compare"
    # The Python operator the op's lambda applies (`a == b`); None: `fn` is a public torch function.
    symbol: ClassVar[str | None] = None

    def result_dtype(self, dtype: DType) -> DType:
        return DType.BOOL

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if self.symbol is None:
            return super().torch_source(attrs, args)
        a, b = args
        return f"{a} {self.symbol} {b}"


class NotEqual(Compare):
    """a != b: ONNX has no NotEqual, so Not(Equal(a, b))."""

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.node("Not", [call.node("Equal", call.inputs)], call.outputs)
        return call.nodes


class Logical(Compare):
    """torch.logical_*: any dtype, nonzero is true; ONNX's And/Or/Xor take bools, so others are cast first
    (a cast to bool is `!= 0` too)."""

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if call.dtype is DType.BOOL:
            return elementwise(call, self.onnx_op)
        bools = [call.node("Cast", [x], to=onnx.TensorProto.BOOL) for x in call.inputs]
        call.node(self.onnx_op, bools, call.outputs)
        return call.nodes


def _cmp(name: str, fn: Callable, dtypes=ALL, *, symbol: str | None = None, discontinuity: Detector | None = None,
         onnx: str | None = None, onnx_types: frozenset[DType] = ORT_COMPARABLE,
         base: type[Compare] = Compare, tf: str | None = None, tf_types: frozenset[DType] = TF_NUMERIC
         ) -> type[Compare]:
    """One comparison; `onnx`: the ONNX operator computing it, run by ONNX Runtime for `onnx_types` (`base` writes
    it otherwise); `tf`: its TensorFlow source (OpSpec.tf_fn), run for `tf_types`."""
    sigs = tuple(Sig((d, d), DType.BOOL) for d in dtypes)
    # staticmethod: a detector that is a plain function (comparison) must not bind to the op as a method.
    return type(name, (base,), {"name": name, "fn": staticmethod(fn), "sigs": sigs, "symbol": symbol,
                                "discontinuity": staticmethod(discontinuity), "onnx_op": onnx,
                                "onnx_since": 1 if onnx else None, "onnx_types": onnx_types, "tf_fn": tf,
                                "tf_types": tf_types})


class Predicate(OpSpec):
    """An elementwise test of one tensor: same shape, bool output."""

    family = "compare"
    ranks = (ANY_RANK,)
    fn: Callable[[torch.Tensor], torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, DType.BOOL)])

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args)


class IsNan(Predicate):
    """isnan: ONNX's IsNaN."""

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "IsNaN")


class IsInf(Predicate):
    """isinf / isposinf / isneginf: ONNX's IsInf, told which signs to detect."""

    signs: ClassVar[tuple[int, int]]  # (detect_positive, detect_negative)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        positive, negative = self.signs
        return elementwise(call, "IsInf", detect_positive=positive, detect_negative=negative)


class IsFinite(Predicate):
    """isfinite: neither NaN nor an infinity, Not(Or(IsNaN, IsInf)) in ONNX."""

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        (x,) = call.inputs
        either = call.node("Or", [call.node("IsNaN", [x]), call.node("IsInf", [x])])
        call.node("Not", [either], call.outputs)
        return call.nodes


def _pred(name: str, fn: Callable, dtypes=FLOATS, *, discontinuity: Detector | None = None,
          exclusions: Mapping[DType, str] = NEVER_NAN,
          onnx_types: frozenset[DType] = frozenset(), base: type[Predicate] = Predicate,
          **body: object) -> type[Predicate]:
    """One predicate; ONNX Runtime runs its counterpart (`base`'s onnx_nodes, if any) for `onnx_types`."""
    sigs = tuple(Sig((d,), DType.BOOL) for d in dtypes)
    # staticmethod, as in _cmp: sign_bit is a plain function.
    return type(name, (base,), {"name": name, "fn": staticmethod(fn), "sigs": sigs,
                                "discontinuity": staticmethod(discontinuity),
                                "onnx_since": 1 if onnx_types else None, "onnx_types": onnx_types,
                                "dtype_exclusions": exclusions, **body})


class IsClose(Compare):
    """torch.isclose with varied tolerances and equal_nan."""

    name = "isclose"
    sigs = tuple(Sig((d, d), DType.BOOL) for d in ALL)  # bools are close when equal

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build:
        out = super().build(ctx, a, b)
        out.attrs = {
            "rtol": ctx.choice("rtol", (1e-5, 0.0, 1e-2, 0.5)),
            "atol": ctx.choice("atol", (1e-8, 0.0, 1e-3, 0.5)),
            "equal_nan": ctx.choice("equal_nan", (False, True)),
        }
        return out

    def forward(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.isclose(a, b, rtol=attrs["rtol"], atol=attrs["atol"], equal_nan=attrs["equal_nan"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.isclose", args, rtol=attrs["rtol"], atol=attrs["atol"], equal_nan=attrs["equal_nan"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        a, b = args
        bound = f"{like(attrs['atol'], a)} + {like(attrs['rtol'], a)} * tf.math.abs({b})"
        close = f"tf.math.logical_or(tf.math.equal({a}, {b}), tf.math.abs({a} - {b}) <= {bound})"
        both_nan = f"tf.math.logical_and(tf.math.is_nan({a}), tf.math.is_nan({b}))"
        return f"tf.math.logical_or({close}, {both_nan})" if attrs["equal_nan"] else close


class Where(OpSpec):
    """torch.where(cond, a, b): all three broadcast together; output has the value dtype."""

    name = "where"
    family = "compare"
    ranks = (ANY_RANK, ANY_RANK, ANY_RANK)
    sigs = tuple(Sig((DType.BOOL, d, d), d) for d in ALL)

    def build(self, ctx: BuildContext, cond: SymTensor, a: SymTensor, b: SymTensor) -> Build:
        shape, reqs = broadcast_where(cond.shape, a.shape, b.shape)
        return Build([SymTensor(shape, a.dtype)], reqs)

    def forward(self, attrs: AttrMap, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(cond, a, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.where", args)

    tf_types = frozenset({DType.BOOL})  # keyed by the condition; tf.where takes every value dtype

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return f"tf.where({', '.join(args)})"

    onnx_since = 9
    onnx_types = frozenset({DType.BOOL})  # keyed by the condition; the values' dtype is checked below

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Where") if call.in_types[1].dtype in ORT_COMPARABLE else None


# Float clamp bounds: every min is <= every max, so any pair is a valid interval (equal pairs included).
FLOAT_MINS = (-1.5, -1.0, -0.5, 0.0, 0.25, 0.5)
FLOAT_MAXES = (0.5, 1.0, 1.5, 2.0, 6.0)


class Clamp(OpSpec):
    """torch.clamp with both bounds, only min, or only max; int bounds for int tensors."""

    name = "clamp"
    family = "compare"
    ranks = (ANY_RANK,)
    sigs = tuple(Sig((d,), d) for d in FLOATS + INTS)
    dtype_exclusions = excluded((DType.BOOL,), "a bool has no order to clamp in: torch promotes it to the bounds' type "
                                               "first, a cast followed by the clamp")
    # The input meets a bound where it is clamped: the attributes min and max (None: that side is open).
    discontinuity = Thresholds((("min", None), ("max", None)))

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        sides = ctx.choice("sides", ("both", "both", "min", "max"))
        lo, hi, reqs = self._bounds(ctx, x.dtype)
        attrs = {"min": lo if sides != "max" else None, "max": hi if sides != "min" else None}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    @staticmethod
    def _bounds(ctx: BuildContext, dtype: DType) -> tuple:
        if dtype.is_float:
            return ctx.choice("min", FLOAT_MINS), ctx.choice("max", FLOAT_MAXES), []
        # Around the values inputs are drawn from, so both sides of each bound are hit.
        lo_range = (0, 15) if dtype is DType.UINT8 else (-10, 10)
        lo = ctx.int_attr("min", *lo_range)
        hi = ctx.int_attr("max", *lo_range)
        return lo, hi, [lo <= hi]

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=attrs["min"], max=attrs["max"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        bounds = {side: attrs[side] for side in ("min", "max") if attrs[side] is not None}
        return call("torch.clamp", args, **bounds)

    tf_types = TF_NUMERIC

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        (x,) = args
        expr = x
        if attrs["min"] is not None:
            expr = f"tf.math.maximum({expr}, {like(attrs['min'], x)})"
        if attrs["max"] is not None:
            expr = f"tf.math.minimum({expr}, {like(attrs['max'], x)})"
        return nan_through(x, expr)

    onnx_since = 11  # Clip's bounds are inputs of the tensor's dtype (ints too) from 11
    onnx_types = ORT_COMPARABLE

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        call.clip(call.inputs[0], attrs["min"], attrs["max"], call.dtype, call.outputs[0])
        return call.nodes


WITH_BOOL = ORT_COMPARABLE | {DType.BOOL}
# torch.logical_*: nonzero is true, NaN included (as a cast to bool reads it).
LOGICAL = "tf.math.logical_{}(tf.cast({{x}}, tf.bool), tf.cast({{y}}, tf.bool))"
OPS: list[type[OpSpec]] = [
    _cmp("eq", lambda a, b: a == b, symbol="==", discontinuity=comparison, onnx="Equal", onnx_types=WITH_BOOL,
         tf="tf.math.equal", tf_types=TF_ALL),
    _cmp("ne", lambda a, b: a != b, symbol="!=", discontinuity=comparison, onnx="Equal", onnx_types=WITH_BOOL,
         base=NotEqual,
         tf="tf.math.not_equal", tf_types=TF_ALL),
    _cmp("lt", lambda a, b: a < b, symbol="<", discontinuity=comparison, onnx="Less",
         tf="tf.math.less"),
    _cmp("le", lambda a, b: a <= b, symbol="<=", discontinuity=comparison, onnx="LessOrEqual",
         tf="tf.math.less_equal"),
    _cmp("gt", lambda a, b: a > b, symbol=">", discontinuity=comparison, onnx="Greater",
         tf="tf.math.greater"),
    _cmp("ge", lambda a, b: a >= b, symbol=">=", discontinuity=comparison, onnx="GreaterOrEqual",
         tf="tf.math.greater_equal"),
    _cmp("logical_and", torch.logical_and, onnx="And", onnx_types=WITH_BOOL, base=Logical,
         tf=LOGICAL.format("and"), tf_types=TF_ALL),
    _cmp("logical_or", torch.logical_or, onnx="Or", onnx_types=WITH_BOOL, base=Logical,
         tf=LOGICAL.format("or"), tf_types=TF_ALL),
    _cmp("logical_xor", torch.logical_xor, onnx="Xor", onnx_types=WITH_BOOL, base=Logical,
         tf=LOGICAL.format("xor"), tf_types=TF_ALL),
    IsClose,
    Where,
    Clamp,
    _pred("isnan", torch.isnan, onnx_types=ORT_FLOATS, base=IsNan,
          tf_fn="tf.math.is_nan"),
    _pred("isinf", torch.isinf, onnx_types=ORT_FLOAT_TESTS, base=IsInf, signs=(1, 1),
          tf_fn="tf.math.is_inf"),
    _pred("isfinite", torch.isfinite, onnx_types=ORT_FLOAT_TESTS, base=IsFinite,
          tf_fn="tf.math.is_finite"),
    _pred("isposinf", torch.isposinf, onnx_types=ORT_FLOAT_TESTS, base=IsInf, signs=(1, 0),
          tf_fn="tf.math.equal({x}, tf.cast(float('inf'), {x}.dtype))"),
    _pred("isneginf", torch.isneginf, onnx_types=ORT_FLOAT_TESTS, base=IsInf, signs=(0, 1),
          tf_fn="tf.math.equal({x}, tf.cast(float('-inf'), {x}.dtype))"),
    _pred("signbit", torch.signbit, FLOATS + SIGNED_INTS, discontinuity=sign_bit,
          exclusions=excluded((DType.UINT8, DType.BOOL), CONSTANT)),
]
