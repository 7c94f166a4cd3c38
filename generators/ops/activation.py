"""Activation functions from torch.nn.functional, every parameter varied (slopes, alphas, thresholds, dims)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import onnx
import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS, INTS, SIGNED_INTS, DType
from generators.ops.base import (
    ANY_RANK,
    PROMOTES_TO_FLOAT,
    SAFE_EXP_ARG,
    AttrMap,
    Build,
    BuildContext,
    OpBug,
    OpSpec,
    SymTensor,
    call,
    excluded,
    function_source,
    pick_axis,
    same_sigs,
)
from generators.ops.discontinuity import Detector, Thresholds, at_zero
from generators.ops.onnx_nodes import ORT_FLOATS, OnnxCall, axis_of, elementwise
from generators.ops.tf_sources import TF_FLOATS, TF_NUMERIC

# ONNX Runtime's LeakyRelu, Elu, Selu, Softplus, HardSigmoid, Softsign, PRelu, Gelu, Mish: float and float16 only.
TRUNCATED_ATTRS = ("torch truncates its float attributes to the integer type (hardtanh(x, -0.5, 0.5) is all zeros): "
                   "the clamp op covers integer bounds")
ORT_F32_F16 = frozenset({DType.FLOAT32, DType.FLOAT16})

INF = float("inf")


class Activation(OpSpec):
    """Elementwise `fn(x, **attrs)`; each attribute is picked from `choices` (first option = PyTorch default)."""

    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    choices: ClassVar[Mapping[str, Sequence[Any]]] = {}
    fn: Callable[..., torch.Tensor]
    # The public dotted name of `fn` where `function_source` cannot find it (F.threshold is `_threshold`).
    source: ClassVar[str | None] = None
    # The ONNX operator computing `fn`, and the op's attribute each of its float attributes takes.
    onnx_op: ClassVar[str | None] = None
    onnx_attr_names: ClassVar[Mapping[str, str]] = {}  # ONNX attribute -> the op's attribute
    onnx_consts: ClassVar[Mapping[str, float]] = {}  # ONNX attributes whose default is not torch's constant

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        attrs = {k: ctx.choice(k, options) for k, options in self.choices.items()}
        return Build([SymTensor(x.shape, x.dtype)], attrs=attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, **attrs)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(self.source or function_source(type(self).fn), args, **attrs)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if self.onnx_op is None:
            return None
        named = {name: float(attrs[k]) for name, k in self.onnx_attr_names.items()}
        return elementwise(call, self.onnx_op, **self.onnx_consts, **named)


class ClipLike(Activation):
    """relu6 and hardtanh: Clip to the op's bounds."""

    bounds: ClassVar[tuple[str | float, str | float]]  # each a number or the attribute holding it

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        lo, hi = (attrs[b] if isinstance(b, str) else b for b in self.bounds)
        call.clip(call.inputs[0], lo, hi, call.dtype, call.outputs[0])
        return call.nodes


class Composite(Activation):
    """An activation ONNX writes as a few elementwise nodes (`compose`), exactly as torch defines it."""

    def compose(self, attrs: AttrMap, call: OnnxCall, x: str) -> str:
        raise NotImplementedError

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        result = self.compose(attrs, call, call.inputs[0])
        last = call.nodes[-1]
        if list(last.output) != [result]:
            raise OpBug(f"{self.name}: compose must end with the node that makes its result")
        last.output[0] = call.outputs[0]  # that node writes the IR output
        return call.nodes


class Silu(Composite):
    """x * sigmoid(x)."""

    def compose(self, attrs: AttrMap, call: OnnxCall, x: str) -> str:
        return call.node("Mul", [x, call.node("Sigmoid", [x])])


class Tanhshrink(Composite):
    """x - tanh(x)."""

    def compose(self, attrs: AttrMap, call: OnnxCall, x: str) -> str:
        return call.node("Sub", [x, call.node("Tanh", [x])])


class Threshold(Composite):
    """x where x > threshold, else value."""

    def compose(self, attrs: AttrMap, call: OnnxCall, x: str) -> str:
        above = call.node("Greater", [x, call.const(attrs["threshold"], call.dtype)])
        return call.node("Where", [above, x, call.const(attrs["value"], call.dtype)])


class Gelu(Composite):
    """ONNX's Gelu from opset 20; before it, the erf or tanh formula that exporters emit and ONNX Runtime's
    GeluFusion rewrites (float and float16 only: ONNX Runtime has no float64 Erf)."""

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        # Written out: tf.nn.gelu's constants are float32, off by 5e-9 in its float64 twin.
        x = args[0]
        if attrs["approximate"] == "tanh":
            return f"0.5 * {x} * (1.0 + tf.math.tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))"
        return f"0.5 * {x} * (1.0 + tf.math.erf({x} / 1.4142135623730951))"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if call.opset >= 20:
            return elementwise(call, "Gelu", approximate=attrs["approximate"])
        return super().onnx_nodes(attrs, call)

    def compose(self, attrs: AttrMap, call: OnnxCall, x: str) -> str:
        dtype = call.dtype
        if attrs["approximate"] == "tanh":  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            cube = call.node("Mul", [call.node("Mul", [x, x]), x])
            inner = call.node("Add", [x, call.node("Mul", [cube, call.const(0.044715, dtype)])])
            curve = call.node("Tanh", [call.node("Mul", [inner, call.const(0.7978845608028654, dtype)])])
        else:  # 0.5 x (1 + erf(x / sqrt(2)))
            curve = call.node("Erf", [call.node("Div", [x, call.const(1.4142135623730951, dtype)])])
        half = call.node("Mul", [x, call.const(0.5, dtype)])
        return call.node("Mul", [half, call.node("Add", [curve, call.const(1.0, dtype)])])


def _act(name: str, fn: Callable, dtypes=FLOATS, *, source: str | None = None,
         discontinuity: Detector | None = None, value_range: tuple[float, float] | None = None,
         emits_zeros: bool = False, float32_attrs: tuple[str, ...] = (), onnx: Mapping[str, Any] | None = None,
         exclusions: Mapping[DType, str] = MappingProxyType({}), tf: str | None = None,
         tf_types: frozenset[DType] = TF_FLOATS, **choices: Sequence[Any]) -> type[Activation]:
    """One activation. `value_range`: the interval its output always lies in, whatever the input (used to avoid
    infeasible graphs); `emits_zeros`: it maps a whole interval to exactly 0; `float32_attrs`: its attributes that
    ONNX stores as float attributes (OpSpec.float32_attrs); `exclusions`: the dtypes eager runs it for that
    `dtypes` leaves out, with why; `tf`: its TensorFlow source (OpSpec.tf_fn), run for `tf_types`; `onnx`: its
    counterpart's class attributes (onnx_op, onnx_attr_names, onnx_types, onnx_since, bounds; `base` the class that
    writes it)."""
    # staticmethod: a detector that is a plain function must not bind to the op as a method.
    body = {"name": name, "fn": staticmethod(fn), "sigs": same_sigs(dtypes), "choices": choices, "source": source,
            "discontinuity": staticmethod(discontinuity), "value_range": value_range, "emits_zeros": emits_zeros,
            "float32_attrs": float32_attrs, "dtype_exclusions": exclusions, "tf_fn": tf, "tf_types": tf_types}
    counterpart = dict(onnx or {})
    base = counterpart.pop("base", Activation)
    if counterpart or base is not Activation:
        body.update({"onnx_since": 1, "onnx_types": ORT_F32_F16, **counterpart})
    return type(name, (base,), body)


class Softplus(Activation):
    """exp(beta * x) is evaluated below the threshold: keep it finite even in float16."""

    name = "softplus"
    fn = staticmethod(F.softplus)
    value_range = (0, INF)
    choices = {"beta": (1.0, 0.5, 2.0, 10.0), "threshold": (20.0, 1.0, 5.0)}

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        return torch.relu(x.float() * attrs["beta"] - SAFE_EXP_ARG).sum()

    tf_fn = "tf.where({x} * {beta} > {threshold}, {x}, tf.math.softplus({x} * {beta}) / {beta})"

    onnx_since = 1
    onnx_types = ORT_F32_F16

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # ONNX's Softplus is log(exp(x) + 1) everywhere: torch's only for beta 1 and below a threshold inputs
        # cannot reach (exp stays finite below SAFE_EXP_ARG).
        if attrs["beta"] != 1.0 or attrs["threshold"] < 20.0:
            return None
        return elementwise(call, "Softplus")


class SoftmaxLike(OpSpec):
    """softmax / log_softmax / softmin along one dim (negative dims too)."""

    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    fn: Callable[..., torch.Tensor]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank) if x.rank else ctx.choice("dim", (0, -1))
        return Build([SymTensor(x.shape, x.dtype)], attrs={"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args, dim=attrs["dim"])

    onnx_since = 13  # before 13, Softmax coerced its input to 2-D around the axis
    onnx_types = ORT_FLOATS
    onnx_op: ClassVar[str]
    negate: ClassVar[bool] = False  # softmin is softmax(-x)

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x = f"-{args[0]}" if self.negate else args[0]
        # A scalar is its own (only) slice: TensorFlow's softmax wants an axis, so it runs on one element.
        return (f"tf.reshape({self.tf_fn}(tf.reshape({x}, [1, -1]), axis=-1), []) if len({args[0]}.shape) == 0 "
                f"else {self.tf_fn}({x}, axis={attrs['dim']})")

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if call.rank == 0:
            return None  # ONNX has no axis in a scalar
        x = call.node("Neg", call.inputs) if self.negate else call.inputs[0]
        call.node(self.onnx_op, [x], call.outputs, axis=axis_of(attrs["dim"], call.rank))
        return call.nodes


def _softmax(name: str, fn: Callable, value_range: tuple[float, float], onnx_op: str, tf_fn: str,
             negate: bool = False) -> type[SoftmaxLike]:
    return type(name, (SoftmaxLike,), {"name": name, "fn": staticmethod(fn), "value_range": value_range,
                                       "onnx_op": onnx_op, "negate": negate, "tf_fn": tf_fn})


class Glu(OpSpec):
    """F.glu halves one dim, whose size must be even."""

    name = "glu"
    family = "activation"
    ranks = ((1, 2, 3, 4, 5),)
    sigs = same_sigs(FLOATS)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = pick_axis(ctx, x.rank)
        size = x.shape[dim]
        shape = tuple(size / 2 if i == dim % x.rank else d for i, d in enumerate(x.shape))
        return Build([SymTensor(shape, x.dtype)], [size % 2 == 0], {"dim": dim})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.glu(x, dim=attrs["dim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.glu", args, dim=attrs["dim"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        halves = f"tf.split({args[0]}, 2, axis={attrs['dim']})"
        return f"{halves}[0] * tf.math.sigmoid({halves}[1])"

    onnx_since = 13
    onnx_types = ORT_FLOATS

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        axis = axis_of(attrs["dim"], call.rank)
        half = call.in_types[0].shape[axis] // 2
        first, second = call.fresh("a"), call.fresh("b")
        call.split(call.inputs[0], (half, half), axis, (first, second))
        call.node("Mul", [first, call.node("Sigmoid", [second])], call.outputs)
        return call.nodes


class Prelu(OpSpec):
    """F.prelu with a weight of 1 or C (= dim 1 of the input) slopes."""

    name = "prelu"
    family = "activation"
    ranks = (ANY_RANK,)
    sigs = same_sigs(FLOATS)
    discontinuity = at_zero()

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        weight = ctx.weight(1, x.dtype)
        per_channel = x.rank >= 2 and ctx.choice("per_channel", (False, True))
        channels = x.shape[1] if per_channel else 1
        return Build([SymTensor(x.shape, x.dtype)], [weight.shape[0] == channels])

    def forward(self, attrs: AttrMap, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.prelu(x, weight)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.prelu", args)

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, w = args
        # The slopes run along axis 1 (one slope for every element below rank 2).
        slope = (f"(tf.reshape({w}, [-1] + [1] * (len({x}.shape) - 2)) if len({x}.shape) >= 2 "
                 f"else tf.reshape({w}, []))")
        return f"tf.where({x} > 0, {x}, {x} * {slope})"

    onnx_since = 9
    onnx_types = ORT_F32_F16

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        # torch's slopes run along dim 1, ONNX broadcasts them from the last dim: [C] becomes [C, 1, ..., 1].
        x, weight = call.inputs
        rank, count = call.rank, call.in_types[1].shape[0]
        slope = call.reshape(weight, [count] + [1] * (rank - 2) if rank >= 2 else [1] * rank)
        call.node("PRelu", [x, slope], call.outputs)
        return call.nodes


# hardsigmoid/hardswish switch branch at -3 and 3; hardshrink/softshrink at +-lambd.
HARD_KNEES = Thresholds(((None, -3.0), (None, 3.0)))
SHRINK_KNEES = Thresholds((("lambd", 0.5), ("-lambd", 0.5)))
# Float attributes of the ONNX counterparts: the op's attribute each one takes.
SLOPE = {"alpha": "negative_slope"}
ALPHA = {"alpha": "alpha"}
OPS: list[type[OpSpec]] = [
    _act("relu", F.relu, FLOATS + INTS, value_range=(0, INF), emits_zeros=True, discontinuity=at_zero(),
         onnx={"onnx_op": "Relu", "onnx_types": ORT_FLOATS},
         tf="tf.nn.relu({x})", tf_types=TF_NUMERIC),  # integer kernels only from opset 14
    _act("relu6", F.relu6, FLOATS + INTS, value_range=(0, 6), emits_zeros=True,
         discontinuity=Thresholds(((None, 0.0), (None, 6.0))),
         onnx={"base": ClipLike, "bounds": (0, 6), "onnx_types": ORT_FLOATS | {DType.INT32, DType.INT64, DType.INT8,
                                                                                DType.UINT8}},
         tf="tf.nn.relu6({x})", tf_types=TF_NUMERIC),
    _act("gelu", F.gelu, value_range=(-0.171, INF), approximate=("none", "tanh"),
         onnx={"base": Gelu}),  # no float64 kernel of Erf
    _act("silu", F.silu, value_range=(-0.279, INF), onnx={"base": Silu, "onnx_types": ORT_FLOATS},
         tf="tf.nn.silu({x})"),
    _act("mish", F.mish, value_range=(-0.309, INF), onnx={"onnx_op": "Mish", "onnx_since": 18},
         tf="{x} * tf.math.tanh(tf.math.softplus({x}))"),
    _act("leaky_relu", F.leaky_relu, discontinuity=at_zero(), float32_attrs=("negative_slope",),
         negative_slope=(0.01, 0.0, 0.1, 0.2, 0.5, 1.5, -0.3),
         onnx={"onnx_op": "LeakyRelu", "onnx_attr_names": SLOPE},
         tf="tf.where({x} > 0, {x}, {x} * {negative_slope})"),
    _act("elu", F.elu, float32_attrs=("alpha",), alpha=(1.0, 0.5, 2.0, 0.0),
         onnx={"onnx_op": "Elu", "onnx_attr_names": ALPHA},
         tf="tf.where({x} > 0, {x}, {alpha} * tf.math.expm1({x}))"),
    _act("selu", F.selu, onnx={"onnx_op": "Selu"},
         tf="tf.nn.selu({x})"),  # ONNX's default alpha and gamma are torch's, in float32
    _act("celu", F.celu, float32_attrs=("alpha",), alpha=(1.0, 0.5, 2.0),
         onnx={"onnx_op": "Celu", "onnx_attr_names": ALPHA, "onnx_since": 12,
               "onnx_types": frozenset({DType.FLOAT32})},
         tf="tf.where({x} > 0, {x}, {alpha} * tf.math.expm1({x} / {alpha}))"),
    Softplus,
    _act("hardswish", F.hardswish, value_range=(-0.375, INF), emits_zeros=True, discontinuity=HARD_KNEES,
         onnx={"onnx_op": "HardSwish", "onnx_since": 14},
         tf="{x} * tf.nn.relu6({x} + 3) / 6"),
    # relu6(x + 3) / 6 is HardSigmoid with alpha 1/6 (ONNX's default is 0.2) and beta 1/2.
    _act("hardsigmoid", F.hardsigmoid, value_range=(0, 1), emits_zeros=True, discontinuity=HARD_KNEES,
         onnx={"onnx_op": "HardSigmoid", "onnx_consts": {"alpha": 1 / 6, "beta": 0.5}},
         tf="tf.nn.relu6({x} + 3) / 6"),
    _act("hardtanh", F.hardtanh, discontinuity=Thresholds((("min_val", -1.0), ("max_val", 1.0))),
         min_val=(-1.0, -2.0, 0.0, -0.5), max_val=(1.0, 2.0, 6.0, 0.5),
         onnx={"base": ClipLike, "bounds": ("min_val", "max_val"), "onnx_types": ORT_FLOATS},
         exclusions=excluded(SIGNED_INTS, TRUNCATED_ATTRS),
         tf="tf.clip_by_value({x}, {min_val}, {max_val})"),
    _act("softsign", F.softsign, value_range=(-1, 1), onnx={"onnx_op": "Softsign"},
         exclusions=excluded(INTS, PROMOTES_TO_FLOAT),
         tf="tf.nn.softsign({x})"),
    _act("tanhshrink", F.tanhshrink, onnx={"base": Tanhshrink, "onnx_types": ORT_FLOATS},
         exclusions=excluded(INTS, PROMOTES_TO_FLOAT),
         tf="{x} - tf.math.tanh({x})"),
    _act("threshold", F.threshold, emits_zeros=True, source="torch.nn.functional.threshold",
         discontinuity=Thresholds((("threshold", None),)),
         threshold=(0.0, 0.5, -1.0, 1.0), value=(0.0, -1.0, 2.0, 0.5),
         onnx={"base": Threshold, "onnx_types": ORT_FLOATS}, exclusions=excluded(SIGNED_INTS, TRUNCATED_ATTRS),
         tf="tf.where({x} > {threshold}, {x}, tf.cast({value}, {x}.dtype))"),
    _act("logsigmoid", F.logsigmoid, value_range=(-INF, 0), source="torch.nn.functional.logsigmoid",
         tf="tf.math.log_sigmoid({x})"),
    # Shrink: x - bias above lambd, x + bias below -lambd, 0 between (lambd and bias are exact in float32). Its
    # float64 kernel in ONNX Runtime 1.32 is off by ~1e-8 (through float32?), so float64 is left out.
    _act("hardshrink", F.hardshrink, emits_zeros=True, source="torch.nn.functional.hardshrink",
         discontinuity=SHRINK_KNEES, lambd=(0.5, 0.0, 0.25, 1.0),
         onnx={"onnx_op": "Shrink", "onnx_attr_names": {"lambd": "lambd"}},
         tf="tf.where(tf.math.abs({x}) > {lambd}, {x}, tf.zeros_like({x}))"),
    _act("softshrink", F.softshrink, emits_zeros=True, discontinuity=SHRINK_KNEES, lambd=(0.5, 0.0, 0.25, 1.0),
         onnx={"onnx_op": "Shrink", "onnx_attr_names": {"lambd": "lambd", "bias": "lambd"}},
         tf="tf.where({x} > {lambd}, {x} - {lambd}, tf.where({x} < -{lambd}, {x} + {lambd}, tf.zeros_like({x})))"),
    _softmax("softmax", F.softmax, (0, 1), "Softmax", "tf.nn.softmax"),
    _softmax("log_softmax", F.log_softmax, (-INF, 0), "LogSoftmax", "tf.nn.log_softmax"),
    _softmax("softmin", F.softmin, (0, 1), "Softmax", "tf.nn.softmax", negate=True),
    Glu,
    Prelu,
]
