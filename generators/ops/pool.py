"""Pooling: max/avg/lp pooling with PyTorch's ceil_mode rule, and adaptive avg/max pooling, batched or not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import FLOATS, INTS, DType
from generators.ops.base import (
    INT64_CPU_ONLY,
    INTS_PROMOTE,
    AttrMap,
    Build,
    BuildContext,
    Dim,
    OpSpec,
    SymTensor,
    call,
    excluded,
    functional_source,
    same_sigs,
)
from generators.ops.conv import spatial_attrs
from generators.ops.discontinuity import PoolIndices
from generators.ops.onnx_nodes import ORT_FLOATS, OnnxCall, batched

F32_64 = (DType.FLOAT32, DType.FLOAT64)  # avg_pool3d has no float16/bfloat16 CPU kernel


def pool_out(size: Dim, k: Dim, s: Dim, p: Dim, d: Dim | int, ceil: bool) -> tuple[Dim, z3.BoolRef]:
    """PyTorch's pooling_output_shape and the requirement that the first window fits the padded input."""
    span = size + 2 * p - d * (k - 1) - 1
    if not ceil:
        return span / s + 1, span >= 0
    # ceil_mode: one more window, unless it would start past the input and the left padding; torch's
    # "drop it when (out - 1) * stride >= size + pad" is this min (given pad <= kernel / 2).
    last_ceil, last_inside = (span + s - 1) / s, (size + p - 1) / s
    return z3.If(last_ceil <= last_inside, last_ceil, last_inside) + 1, span >= 0


# A pool over an input without its batch dim (rank n + 1): torch's TorchScript exporter writes an ONNX pooling node
# for it as for a batched one, which ONNX's schema rejects (each pool and message its own root cause, one feature).
UNBATCHED = "pool:unbatched"


def unbatched_feature(n: int, ranks: Sequence[int]) -> tuple[str, ...]:
    """UNBATCHED where the pooled input has no batch dim."""
    return (UNBATCHED,) if ranks and ranks[0] == n + 1 else ()


def concrete_attrs(ctx: BuildContext, name: str, n: int, options: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(ctx.choice(f"{name}{i}", options) for i in range(n))


class PoolND(OpSpec):
    """A sliding-window pool over `n` spatial dims (kernel, stride, padding <= kernel/2, dilation, ceil_mode)."""

    family = "pool"
    n: ClassVar[int]
    fn: ClassVar[Any]
    has_padding: ClassVar[bool] = True
    has_dilation: ClassVar[bool] = False

    def windows(self, ctx: BuildContext, x: SymTensor) -> tuple[tuple[Dim, ...], dict, list[z3.BoolRef]]:
        """Output spatial sizes, the window attributes and their requirements."""
        n = self.n
        kernel = spatial_attrs(ctx, "kernel", n, 1, 4)
        # stride=None means stride = kernel in torch; converters sometimes forget that default.
        explicit = ctx.choice("explicit_stride", (True, True, True, False))
        # Concrete strides and dilations keep the size rule linear; symbolic ones made max_pool3d unsolvable.
        stride = concrete_attrs(ctx, "stride", n, (1, 2, 2, 3)) if explicit else None
        pads = spatial_attrs(ctx, "padding", n, 0, 2) if self.has_padding else (0,) * n
        dilation = concrete_attrs(ctx, "dilation", n, (1, 1, 2, 3)) if self.has_dilation else (1,) * n
        ceil = ctx.choice("ceil_mode", (False, True))
        sizes, reqs = [], []
        for size, k, s, p, d in zip(x.shape[-n:], kernel, stride or kernel, pads, dilation, strict=True):
            out, fits = pool_out(size, k, s, p, d, ceil)
            sizes.append(out)
            reqs += [fits, 2 * p <= k]  # torch: pad should be at most half of the kernel size
            if d != 1:
                # A dilated window over padding can miss every real element and max-pool to -inf.
                reqs.append(p == 0)
        attrs = {"kernel_size": kernel, "stride": stride, "ceil_mode": ceil}
        if self.has_padding:
            attrs["padding"] = pads
        if self.has_dilation:
            attrs["dilation"] = dilation
        return tuple(sizes), attrs, reqs

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        return unbatched_feature(self.n, ranks)

    onnx_op: ClassVar[str | None] = None  # the ONNX pooling node (None: no counterpart)

    def onnx_window(self, attrs: AttrMap) -> dict[str, Any] | None:
        """The ONNX attributes of the pooling window; None where ONNX pools otherwise (ceil_mode: torch drops a
        last window that starts in the padding, ONNX's rule differs between opsets and runtimes)."""
        if attrs["ceil_mode"]:
            return None
        kernel = list(attrs["kernel_size"])
        pads = list(attrs.get("padding") or (0,) * self.n)
        return {"kernel_shape": kernel, "strides": list(attrs["stride"] or kernel), "pads": pads * 2}

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        window = self.onnx_window(attrs)
        if self.onnx_op is None or window is None:
            return None
        op_type = self.onnx_op
        return batched(call, self.n, lambda x, out: call.node(op_type, [x], [out], **window))


class MaxPoolND(PoolND):
    preserves_values = True
    has_dilation = True
    discontinuity = PoolIndices()  # ties within a window make the returned index ambiguous
    onnx_op, onnx_since = "MaxPool", 12
    onnx_types = ORT_FLOATS | {DType.INT8, DType.UINT8}  # MaxPool's kernels (no 32/64-bit integers)

    def onnx_window(self, attrs: AttrMap) -> dict[str, Any] | None:
        window = super().onnx_window(attrs)
        if window is None or attrs["return_indices"]:
            return None  # ONNX's indices are flat over the whole tensor, torch's per plane
        return {**window, "dilations": list(attrs["dilation"])}

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        sizes, attrs, reqs = self.windows(ctx, x)
        attrs["return_indices"] = ctx.choice("return_indices", (False, False, True))
        out = SymTensor(x.shape[:-self.n] + sizes, x.dtype)
        outs = [out, SymTensor(out.shape, DType.INT64)] if attrs["return_indices"] else [out]
        return Build(outs, reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return type(self).fn(x, attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["dilation"],
                             ceil_mode=attrs["ceil_mode"], return_indices=attrs["return_indices"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        # With return_indices the call returns the (values, indices) tuple, the node's two outputs.
        stride = {"stride": attrs["stride"]} if attrs["stride"] is not None else {}
        return call(functional_source(type(self).fn), args, attrs["kernel_size"], **stride, padding=attrs["padding"],
                    dilation=attrs["dilation"], ceil_mode=attrs["ceil_mode"], return_indices=attrs["return_indices"])


class AvgPoolND(PoolND):
    keeps_zeros = True  # a window of zeros averages to zero
    has_divisor: ClassVar[bool] = True
    onnx_op, onnx_since = "AveragePool", 11
    onnx_core = "AveragePool"
    onnx_types = frozenset({DType.FLOAT32, DType.FLOAT16})  # AveragePool's kernels

    def onnx_window(self, attrs: AttrMap) -> dict[str, Any] | None:
        window = super().onnx_window(attrs)
        if window is None or attrs["divisor_override"] is not None:
            return None
        return {**window, "count_include_pad": int(attrs["count_include_pad"])}

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        sizes, attrs, reqs = self.windows(ctx, x)
        if self.n == 3:
            # avg_pool3d's CPU kernel also demands the unpadded input be at least the kernel (pool3d_shape_check).
            reqs += [size >= k for size, k in zip(x.shape[-3:], attrs["kernel_size"], strict=True)]
        attrs["count_include_pad"] = ctx.choice("count_include_pad", (True, False))
        divisor = self.has_divisor and ctx.choice("use_divisor_override", (False, False, True))
        attrs["divisor_override"] = ctx.int_attr("divisor_override", 1, 9) if divisor else None
        return Build([SymTensor(x.shape[:-self.n] + sizes, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        extra = {"divisor_override": attrs["divisor_override"]} if self.has_divisor else {}
        return type(self).fn(x, attrs["kernel_size"], attrs["stride"], attrs["padding"], ceil_mode=attrs["ceil_mode"],
                             count_include_pad=attrs["count_include_pad"], **extra)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        stride = {"stride": attrs["stride"]} if attrs["stride"] is not None else {}
        extra = {"divisor_override": attrs["divisor_override"]} if attrs["divisor_override"] is not None else {}
        return call(functional_source(type(self).fn), args, attrs["kernel_size"], **stride, padding=attrs["padding"],
                    ceil_mode=attrs["ceil_mode"], count_include_pad=attrs["count_include_pad"], **extra)


class LpPoolND(PoolND):
    """(sum x^p)^(1/p) over each window; an odd p needs non-negative window sums."""

    has_padding = False

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        sizes, attrs, reqs = self.windows(ctx, x)
        attrs["norm_type"] = ctx.choice("norm_type", (1.0, 2.0, 3.0))
        return Build([SymTensor(x.shape[:-self.n] + sizes, x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        kernel = attrs["kernel_size"][0] if self.n == 1 else attrs["kernel_size"]
        stride = attrs["stride"][0] if self.n == 1 and attrs["stride"] else attrs["stride"]
        return type(self).fn(x, attrs["norm_type"], kernel, stride, ceil_mode=attrs["ceil_mode"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        kernel = attrs["kernel_size"][0] if self.n == 1 else attrs["kernel_size"]
        stride = attrs["stride"][0] if self.n == 1 and attrs["stride"] else attrs["stride"]
        strides = {"stride": stride} if stride is not None else {}
        return call(functional_source(type(self).fn), args, attrs["norm_type"], kernel, **strides,
                    ceil_mode=attrs["ceil_mode"])

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        if attrs["norm_type"] != 3.0 or not x.is_floating_point():
            return None
        return torch.relu(-x.float()).sum()  # a negative sum of cubes has no real cube root


class AdaptivePoolND(OpSpec):
    """Adaptive pooling to a fixed output size (larger than the input too); None keeps a dim (2d/3d)."""
    preserves_values = True

    family = "pool"
    n: ClassVar[int]
    fn: ClassVar[Any]
    indices: ClassVar[bool] = False

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        n = self.n
        keep = (False, False, False, True) if n > 1 else (False,)
        # Real models mostly pool to a size that divides the input (global pooling, halving), and some exporters
        # support only that case (TorchScript: "output size that are not factor of input size"): half the sized
        # dims get a small constant size that the input dim must be a multiple of (linear for z3; a variable
        # divisor made generation twice as slow), the other half a free size.
        sizes: list[Any] = []
        requires = []
        for i, d in enumerate(x.shape[-n:]):
            if ctx.choice(f"keep{i}", keep):
                sizes.append(None)
            elif ctx.choice(f"divides{i}", (False, True)):
                sizes.append(ctx.choice(f"size{i}", (1, 1, 2, 3, 4)))
                requires.append(d % sizes[-1] == 0)
            else:
                sizes.append(ctx.int_attr(f"size{i}", 1, 16))
        size = tuple(sizes)
        dims = tuple(d if s is None else s for d, s in zip(x.shape[-n:], size, strict=True))
        out = SymTensor(x.shape[:-n] + dims, x.dtype)
        attrs: dict[str, Any] = {"output_size": size}
        outs = [out]
        if self.indices:
            attrs["return_indices"] = ctx.choice("return_indices", (False, False, True))
            outs += [SymTensor(out.shape, DType.INT64)] if attrs["return_indices"] else []
        return Build(outs, requires, attrs)

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        return unbatched_feature(self.n, ranks)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        size = attrs["output_size"][0] if self.n == 1 else attrs["output_size"]
        if self.indices:
            return type(self).fn(x, size, return_indices=attrs["return_indices"])
        return type(self).fn(x, size)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        size = attrs["output_size"][0] if self.n == 1 else attrs["output_size"]
        extra = {"return_indices": attrs["return_indices"]} if self.indices else {}
        return call(functional_source(type(self).fn), args, size, **extra)


def _pool(name: str, base: type[OpSpec], n: int, fn: Any, dtypes=FLOATS, **extra: Any) -> type[OpSpec]:
    attrs = {"name": name, "n": n, "fn": staticmethod(fn), "sigs": same_sigs(dtypes), "ranks": ((n + 1, n + 2),)}
    return type(name, (base,), attrs | extra)


# torch averages int64 on CPU only, truncated toward zero; ONNX's AveragePool takes floats only.
INT_AVERAGE = excluded((DType.INT64,), INT64_CPU_ONLY)
OPS: list[type[OpSpec]] = [
    _pool("max_pool1d", MaxPoolND, 1, F.max_pool1d, dtype_exclusions=excluded(
        INTS, "the 1-D CPU kernel without indices has no integer support: only return_indices=True runs them")),
    _pool("max_pool2d", MaxPoolND, 2, F.max_pool2d, FLOATS + INTS),
    _pool("max_pool3d", MaxPoolND, 3, F.max_pool3d, FLOATS + INTS),
    _pool("avg_pool1d", AvgPoolND, 1, F.avg_pool1d, has_divisor=False, dtype_exclusions=INT_AVERAGE),
    _pool("avg_pool2d", AvgPoolND, 2, F.avg_pool2d, dtype_exclusions=INT_AVERAGE),
    _pool("avg_pool3d", AvgPoolND, 3, F.avg_pool3d, F32_64, dtype_exclusions=INT_AVERAGE),
    _pool("lp_pool1d", LpPoolND, 1, F.lp_pool1d, dtype_exclusions=INTS_PROMOTE),
    _pool("lp_pool2d", LpPoolND, 2, F.lp_pool2d, dtype_exclusions=INTS_PROMOTE),
    _pool("adaptive_avg_pool1d", AdaptivePoolND, 1, F.adaptive_avg_pool1d),
    _pool("adaptive_avg_pool2d", AdaptivePoolND, 2, F.adaptive_avg_pool2d),
    _pool("adaptive_avg_pool3d", AdaptivePoolND, 3, F.adaptive_avg_pool3d),
    _pool("adaptive_max_pool1d", AdaptivePoolND, 1, F.adaptive_max_pool1d, indices=True,
          discontinuity=PoolIndices()),
    _pool("adaptive_max_pool2d", AdaptivePoolND, 2, F.adaptive_max_pool2d, indices=True,
          discontinuity=PoolIndices()),
    _pool("adaptive_max_pool3d", AdaptivePoolND, 3, F.adaptive_max_pool3d, indices=True,
          discontinuity=PoolIndices()),
]
