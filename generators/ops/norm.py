"""Normalizations: batch/instance norm (running or batch statistics), layer/rms/group norm, LRN, F.normalize."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import FLOATS, DType
from generators.ops.base import (
    PROMOTES_TO_FLOAT,
    AttrMap,
    Build,
    BuildContext,
    Dim,
    OpSpec,
    SymTensor,
    call,
    excluded,
    functional_source,
    literal,
    same_sigs,
)
from generators.ops.onnx_nodes import ORT_FLOATS, OnnxCall
from generators.ops.tf_sources import tf_literal

EPS = (1e-5, 1e-3, 0.1)
MOMENTUM = (0.1, 0.0, 0.5)  # F.batch_norm takes no None (that is only the nn module's)
# Running statistics are buffers in a real model: their declared ranges also keep the input search off them.
VAR_RANGE = (0.1, 2.0)  # running variances must be positive
MEAN_RANGE = (-1.0, 1.0)


def channel_weights(ctx: BuildContext, dtype: DType, c: Dim, count: int, **bounds: Any) -> list[z3.BoolRef]:
    """`count` fresh 1-D weights of length c (created in order), returned as their length requirements."""
    return [ctx.weight(1, dtype, **bounds).shape[0] == c for _ in range(count)]


def not_single(dims: tuple[Dim, ...]) -> z3.BoolRef:
    """More than one element over `dims` (batch statistics need it), without a product of dims."""
    return z3.Or(*[d > 1 for d in dims]) if dims else z3.BoolVal(False)


def running_and_affine(ctx: BuildContext, x: SymTensor, running: bool) -> tuple[list[z3.BoolRef], bool]:
    """Weights for running mean/var (when `running`) then an optional affine weight/bias, all of x's channels."""
    c = x.shape[1]
    reqs: list[z3.BoolRef] = []
    if running:
        reqs += channel_weights(ctx, x.dtype, c, 1, lo=MEAN_RANGE[0], hi=MEAN_RANGE[1])
        reqs += channel_weights(ctx, x.dtype, c, 1, lo=VAR_RANGE[0], hi=VAR_RANGE[1])
    affine = ctx.choice("affine", (True, False))
    reqs += channel_weights(ctx, x.dtype, c, 2 if affine else 0)
    return reqs, affine


def split_weights(ws: tuple[torch.Tensor, ...], running: bool, affine: bool) -> tuple[torch.Tensor | None, ...]:
    """(running mean, running var, weight, bias) from the weights running_and_affine made; None where absent."""
    mean, var = ws[:2] if running else (None, None)
    weight, bias = ws[-2:] if affine else (None, None)
    return mean, var, weight, bias


def split_weight_names(args: Sequence[str], running: bool, affine: bool) -> list[str]:
    """`split_weights` over source: the names of (running mean, running var, weight, bias), 'None' where absent."""
    mean, var = args[:2] if running else ("None", "None")
    weight, bias = args[-2:] if affine else ("None", "None")
    return [mean, var, weight, bias]


def onnx_batch_norm(call: OnnxCall, ws: Sequence[str], affine: bool, eps: float) -> list[onnx.NodeProto]:
    """BatchNormalization (inference) from running statistics `ws` (mean, var, then weight and bias when
    `affine`): ONNX wants a scale and a bias, ones and zeros where torch has none."""
    mean, var, *affine_ws = ws
    scale, bias = affine_ws if affine else channel_constants(call, 1)
    call.node("BatchNormalization", [call.inputs[0], scale, bias, mean, var], call.outputs, epsilon=eps)
    return call.nodes


def channel_constants(call: OnnxCall, axis: int) -> tuple[str, str]:
    """A scale of ones and a bias of zeros over the input's dims from `axis` on (1: the channels)."""
    shape = call.in_types[0].shape[axis:axis + 1] if axis == 1 else call.in_types[0].shape[axis:]
    return call.const(1.0, call.dtype, shape), call.const(0.0, call.dtype, shape)


def last_dims_source(x: str, count: int) -> str:
    """Source for the shape of `x`'s last `count` (>= 1) dims, read from the tensor when the repro runs."""
    return f"{x}.shape[{-count}:]"


def tf_normalized(x: str, stats: str, weights: Sequence[str], eps: float) -> str:
    """tf.nn.batch_normalization of `x` by the (mean, variance) pair `stats`, scaled and shifted by `weights`
    (scale then offset, 'None' where absent)."""
    scale, offset = weights
    return (f"tf.nn.batch_normalization({x}, *{stats}, offset={offset}, scale={scale}, "
            f"variance_epsilon={tf_literal(eps)})")


def tf_channels(x: str, w: str) -> str:
    """A per-channel weight `w` shaped to broadcast over NC... `x` (its dim 1); 'None' stays None."""
    return w if w == "None" else f"tf.reshape({w}, [-1] + [1] * (len({x}.shape) - 2))"


class Norm(OpSpec):
    family = "norm"
    unit_scale = True
    sigs = same_sigs(FLOATS)
    # Exported as ONNX normalizations whose epsilon is a float attribute (Batch-, Instance-, Layer-, Group-, RMS-).
    float32_attrs: ClassVar[tuple[str, ...]] = ("eps",)
    # torch normalizes float16/bfloat16 in float32, tf.nn.batch_normalization in the half type (off by up to 1.2
    # relative in bfloat16): only the wide floats have a TensorFlow source that matches.
    tf_types = frozenset({DType.FLOAT32, DType.FLOAT64})


class BatchNorm(Norm):
    """F.batch_norm with running statistics (eval), or batch statistics with no running buffers."""

    name = "batch_norm"
    ranks = ((2, 3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        batch_stats = ctx.choice("batch_stats", (False, False, True))
        reqs, affine = running_and_affine(ctx, x, running=not batch_stats)
        if batch_stats:
            reqs.append(not_single(x.shape[:1] + x.shape[2:]))
        attrs = {"batch_stats": batch_stats, "affine": affine, "eps": ctx.choice("eps", EPS),
                 "momentum": ctx.choice("momentum", MOMENTUM)}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        mean, var, weight, bias = split_weights(ws, not attrs["batch_stats"], attrs["affine"])
        return F.batch_norm(x, mean, var, weight, bias, training=attrs["batch_stats"], momentum=attrs["momentum"],
                            eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, *ws = args
        weights = split_weight_names(ws, not attrs["batch_stats"], attrs["affine"])
        return call(functional_source(F.batch_norm), [x, *weights], training=attrs["batch_stats"],
                    momentum=attrs["momentum"], eps=attrs["eps"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, *ws = args
        mean, var, weight, bias = (tf_channels(x, w) for w in split_weight_names(ws, not attrs["batch_stats"],
                                                                                 attrs["affine"]))
        # Batch statistics: the biased variance over every dim but the channels, as torch normalizes by.
        stats = (f"tf.nn.moments({x}, axes=[0, *range(2, len({x}.shape))], keepdims=True)" if attrs["batch_stats"]
                 else f"({mean}, {var})")
        return tf_normalized(x, stats, [weight, bias], attrs["eps"])

    onnx_since = 9
    onnx_types = ORT_FLOATS

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if attrs["batch_stats"]:
            return None  # training mode: ONNX's training outputs are running statistics, not batch statistics
        return onnx_batch_norm(call, call.inputs[1:], attrs["affine"], float(attrs["eps"]))


class InstanceNorm(Norm):
    """F.instance_norm from per-instance statistics, or from running statistics (use_input_stats=False)."""

    name = "instance_norm"
    ranks = ((3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        use_input_stats = ctx.choice("use_input_stats", (True, True, False))
        # With input statistics, running buffers would be updated in place, so none are passed.
        reqs, affine = running_and_affine(ctx, x, running=not use_input_stats)
        if use_input_stats:
            reqs.append(not_single(x.shape[2:]))
        attrs = {"use_input_stats": use_input_stats, "affine": affine, "eps": ctx.choice("eps", EPS),
                 "momentum": ctx.choice("momentum", MOMENTUM)}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        mean, var, weight, bias = split_weights(ws, not attrs["use_input_stats"], attrs["affine"])
        return F.instance_norm(x, mean, var, weight, bias, use_input_stats=attrs["use_input_stats"],
                               momentum=attrs["momentum"], eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, *ws = args
        weights = split_weight_names(ws, not attrs["use_input_stats"], attrs["affine"])
        return call(functional_source(F.instance_norm), [x, *weights], use_input_stats=attrs["use_input_stats"],
                    momentum=attrs["momentum"], eps=attrs["eps"])

    onnx_since = 9
    onnx_types = frozenset({DType.FLOAT32, DType.FLOAT16})  # InstanceNormalization's kernels

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        eps = float(attrs["eps"])
        if not attrs["use_input_stats"]:  # running statistics: a batch norm in inference mode
            return onnx_batch_norm(call, call.inputs[1:], attrs["affine"], eps)
        if call.dtype is DType.FLOAT16:
            return None  # ONNX Runtime's half kernel accumulates in half precision, torch in float
        scale, bias = call.inputs[1:] if attrs["affine"] else channel_constants(call, 1)
        call.node("InstanceNormalization", [call.inputs[0], scale, bias], call.outputs, epsilon=eps)
        return call.nodes


class LayerNorm(Norm):
    """F.layer_norm over the last k dims, with weight and bias, weight only, or neither."""

    name = "layer_norm"
    ranks = ((1, 2, 3, 4, 5),)
    affine_options: tuple[str, ...] = ("weight_bias", "weight", "none")
    eps_options: tuple = EPS

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        k = ctx.choice("normalized_dims", tuple(range(1, x.rank + 1)))
        affine = ctx.choice("affine", self.affine_options)
        reqs = []
        for _ in range({"weight_bias": 2, "weight": 1, "none": 0}[affine]):
            w = ctx.weight(k, x.dtype)
            reqs += [a == b for a, b in zip(w.shape, x.shape[-k:], strict=True)]
        attrs = {"normalized_dims": k, "affine": affine, "eps": ctx.choice("eps", self.eps_options)}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        shape = x.shape[x.dim() - attrs["normalized_dims"]:]
        weight, bias = (tuple(ws) + (None, None))[:2]
        return F.layer_norm(x, shape, weight, bias, eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, *ws = args  # weight and bias, weight only, or neither
        return call(functional_source(F.layer_norm), [x, last_dims_source(x, attrs["normalized_dims"]), *ws],
                    eps=attrs["eps"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, *ws = args
        axes = list(range(-attrs["normalized_dims"], 0))
        weights = (list(ws) + ["None", "None"])[:2]
        return tf_normalized(x, f"tf.nn.moments({x}, axes={axes}, keepdims=True)", weights, attrs["eps"])

    onnx_since = 1
    onnx_types = ORT_FLOATS

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        axis, eps = call.rank - attrs["normalized_dims"], float(attrs["eps"])
        ws = list(call.inputs[1:])
        if call.opset >= 17:
            scale = ws.pop(0) if ws else channel_constants(call, axis)[0]
            call.node("LayerNormalization", [call.inputs[0], scale, *ws], call.outputs, axis=axis, epsilon=eps)
            return call.nodes
        if call.dtype is DType.FLOAT16:
            return None  # the formula in half precision strays from torch's float accumulation
        return self.onnx_formula(call, list(range(axis, call.rank)), eps, ws)

    def onnx_formula(self, call: OnnxCall, axes: list[int], eps: float, ws: list[str]) -> list[onnx.NodeProto]:
        """(x - mean) / sqrt(biased var + eps) * weight + bias: what exporters emit before opset 17 and ONNX
        Runtime's LayerNormFusion rewrites into one node."""
        x, dtype = call.inputs[0], call.dtype
        centred = call.node("Sub", [x, call.reduce("ReduceMean", x, axes, True)])
        var = call.reduce("ReduceMean", call.node("Mul", [centred, centred]), axes, True)
        scale = call.node("Sqrt", [call.node("Add", [var, call.const(eps, dtype)])])
        steps = [("Div", scale), *zip(("Mul", "Add"), ws)]
        for i, (op_type, operand) in enumerate(steps):
            last = i == len(steps) - 1
            centred = call.node(op_type, [centred, operand], call.outputs if last else None)
        return call.nodes


class RmsNorm(LayerNorm):
    name = "rms_norm"
    onnx_since = None  # RMSNormalization is new in opset 23
    affine_options = ("weight", "none")
    eps_options = (None, 1e-6, 1e-3)  # None: torch uses the dtype's machine epsilon

    def forward(self, attrs: AttrMap, x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        shape = x.shape[x.dim() - attrs["normalized_dims"]:]
        return F.rms_norm(x, shape, ws[0] if ws else None, eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, *ws = args  # the weight, or nothing
        return call(functional_source(F.rms_norm), [x, last_dims_source(x, attrs["normalized_dims"]), *ws],
                    eps=attrs["eps"])

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        x, *ws = args
        axes = list(range(-attrs["normalized_dims"], 0))
        # No eps: torch adds the dtype's machine epsilon (float64's in the twin).
        eps = tf_literal(attrs["eps"]) if attrs["eps"] is not None else f"np.finfo({x}.dtype.as_numpy_dtype).eps"
        scaled = f"{x} * tf.math.rsqrt(tf.math.reduce_mean(tf.math.square({x}), axis={axes}, keepdims=True) + {eps})"
        return f"{scaled} * {ws[0]}" if ws else scaled


class GroupNorm(Norm):
    """F.group_norm; channels divisible by the groups (one group per channel is an option)."""

    name = "group_norm"
    ranks = ((2, 3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        c = x.shape[1]
        groups = ctx.choice("num_groups", (1, 2, 3, 4, "channels"))
        # torch wants more than one value per group: N * C/groups * spatial > 1.
        if groups == "channels":
            groups, reqs = c, [not_single(x.shape[:1] + x.shape[2:])]
        else:
            reqs = [c % groups == 0, z3.Or(c > groups, not_single(x.shape[:1] + x.shape[2:]))]
        affine = ctx.choice("affine", (True, False))
        reqs += channel_weights(ctx, x.dtype, c, 2 if affine else 0)
        attrs = {"num_groups": groups, "affine": affine, "eps": ctx.choice("eps", EPS)}
        return Build([SymTensor(x.shape, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor, *ws: torch.Tensor) -> torch.Tensor:
        weight, bias = ws if attrs["affine"] else (None, None)
        return F.group_norm(x, attrs["num_groups"], weight, bias, eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, *ws = args  # weight and bias, or neither; ignored without affine, as forward ignores them
        weights = ws if attrs["affine"] else []
        return call(functional_source(F.group_norm), [x, literal(attrs["num_groups"]), *weights], eps=attrs["eps"])


class LocalResponseNorm(Norm):
    """F.local_response_norm across channels; 4-D and wider inputs go through avg_pool3d (no half kernels)."""

    name = "local_response_norm"
    ranks = ((3, 4, 5),)
    dtype_exclusions = excluded((DType.INT64,), PROMOTES_TO_FLOAT)  # through the int64 average pool
    float32_attrs = ("alpha", "beta", "k")  # ONNX LRN's alpha, beta and bias are floats

    def build(self, ctx: BuildContext, x: SymTensor) -> Build | None:
        if x.rank > 3 and x.dtype not in (DType.FLOAT32, DType.FLOAT64):
            return None
        attrs = {"size": ctx.int_attr("size", 1, 6), "alpha": ctx.choice("alpha", (1e-4, 0.01, 1.0)),
                 "beta": ctx.choice("beta", (0.75, 0.5, 1.0)), "k": ctx.choice("k", (1.0, 2.0, 0.5))}
        return Build([SymTensor(x.shape, x.dtype)], [], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.local_response_norm(x, attrs["size"], alpha=attrs["alpha"], beta=attrs["beta"], k=attrs["k"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(functional_source(F.local_response_norm), args, attrs["size"], alpha=attrs["alpha"],
                    beta=attrs["beta"], k=attrs["k"])


class Normalize(Norm):
    """F.normalize: x / max(||x||_p, eps) along one dim (negative dims too)."""

    name = "normalize"
    ranks = ((1, 2, 3, 4, 5),)
    float32_attrs = ()  # eps becomes a constant tensor of x's dtype (a Clip or Max), not a float attribute

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        dim = ctx.choice("dim", tuple(range(-x.rank, x.rank)))
        attrs = {"p": ctx.choice("p", (2.0, 1.0, 3.0)), "dim": dim, "eps": ctx.choice("eps", (1e-12, 1e-6, 0.1))}
        return Build([SymTensor(x.shape, x.dtype)], [], attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=attrs["p"], dim=attrs["dim"], eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(functional_source(F.normalize), args, p=attrs["p"], dim=attrs["dim"], eps=attrs["eps"])


OPS: list[type[OpSpec]] = [BatchNorm, InstanceNorm, LayerNorm, RmsNorm, GroupNorm, LocalResponseNorm, Normalize]
