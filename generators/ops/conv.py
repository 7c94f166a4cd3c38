"""Convolutions through torch.nn.functional: conv1d/2d/3d and conv_transpose1d/2d/3d, batched or not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import onnx
import torch
import torch.nn.functional as F
import z3

from generators.dtypes import FLOATS, DType
from generators.ops.base import (
    INT64_CPU_ONLY,
    AttrMap,
    Build,
    BuildContext,
    Dim,
    OpSpec,
    SymTensor,
    call,
    conv_out,
    excluded,
    functional_source,
    same_sigs,
)
from generators.ops.onnx_nodes import PAD_MODES, OnnxCall, batched
from generators.ops.shape import pad_feature

ORT_CONV = frozenset({DType.FLOAT32, DType.FLOAT16})  # ONNX Runtime's Conv and ConvTranspose kernels

# The CPU kernels also take int64 (not int32 once groups/bias are used); ONNX Conv is float-only, so
# integer convolutions would only measure exporter refusals. Floats only.
CONV_DTYPES = FLOATS
MAX_KERNEL = 5
GROUP_OPTIONS = (1, 1, 2, 3, 4, "depthwise")
PADDING_MODES = ("zeros", "zeros", "reflect", "replicate", "circular")


def spatial_attrs(ctx: BuildContext, name: str, n: int, lo: int, hi: int) -> tuple[Dim, ...]:
    """One symbolic integer attribute per spatial dim (stride0, stride1, ...)."""
    return tuple(ctx.int_attr(f"{name}{i}", lo, hi) for i in range(n))


def torch_pad(padding: tuple[int, ...]) -> tuple[int, ...]:
    """Symmetric per-dim padding in F.pad's order (last dim first, each twice)."""
    return tuple(p for p in reversed(padding) for _ in range(2))


class ConvND(OpSpec):
    emits_zeros = True  # outputs computed from padding alone are exactly 0 (or the bias)
    """A convolution over `n` spatial dims; the weight and bias come from ctx.weight."""

    family = "conv"
    onnx_core = "Conv"
    sigs = same_sigs(CONV_DTYPES)
    dtype_exclusions = excluded((DType.INT64,), INT64_CPU_ONLY)
    n: ClassVar[int]
    fn: ClassVar[Any]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        n = self.n
        c_in, spatial = x.shape[-n - 1], x.shape[-n:]
        w = ctx.weight(n + 2, x.dtype)
        kernel = w.shape[2:]
        groups, c_out, reqs = self.channels(ctx, c_in, w)
        reqs += [k <= MAX_KERNEL for k in kernel]
        dilation = spatial_attrs(ctx, "dilation", n, 1, 3)
        sizes, attrs, geo_reqs = self.geometry(ctx, spatial, kernel, dilation)
        attrs.update(groups=groups, dilation=dilation, bias=ctx.choice("bias", (True, False)))
        if attrs["bias"]:
            reqs.append(ctx.weight(1, x.dtype).shape[0] == c_out)
        return Build([SymTensor(x.shape[:-n - 1] + (c_out,) + sizes, x.dtype)], reqs + geo_reqs, attrs)

    def channels(self, ctx: BuildContext, c_in: Dim, w: SymTensor) -> tuple[Any, Dim, list[z3.BoolRef]]:
        """Groups, output channels and the channel requirements; weight is [C_out, C_in/groups, *k]."""
        groups = ctx.choice("groups", GROUP_OPTIONS)
        if groups == "depthwise":
            mult = ctx.choice("depth_multiplier", (1, 2))
            return c_in, w.shape[0], [w.shape[1] == 1, w.shape[0] == c_in * mult]
        return groups, w.shape[0], [c_in == groups * w.shape[1], w.shape[0] % groups == 0]

    def geometry(self, ctx, spatial, kernel, dilation) -> tuple[tuple[Dim, ...], dict, list[z3.BoolRef]]:
        """Output spatial sizes, stride/padding attributes and their requirements."""
        n = self.n
        padding = ctx.choice("padding_kind", ("ints", "ints", "ints", "same", "valid"))
        if padding == "same":  # torch: stride must be 1; output keeps the input's size
            return tuple(spatial), {"stride": (1,) * n, "padding": "same", "padding_mode": "zeros"}, []
        stride = spatial_attrs(ctx, "stride", n, 1, 3)
        pads = (0,) * n if padding == "valid" else spatial_attrs(ctx, "padding", n, 0, 3)
        mode = "zeros" if padding == "valid" else ctx.choice("padding_mode", PADDING_MODES)
        reqs = [size + 2 * p >= d * (k - 1) + 1 for size, p, d, k in zip(spatial, pads, dilation, kernel, strict=True)]
        if mode in ("reflect", "circular"):  # reflect needs pad < size; circular pad <= size
            reqs += [p < size if mode == "reflect" else p <= size for p, size in zip(pads, spatial, strict=True)]
        sizes = tuple(conv_out(*a) for a in zip(spatial, kernel, stride, pads, dilation, strict=True))
        attrs = {"stride": stride, "padding": padding if padding == "valid" else pads, "padding_mode": mode}
        return sizes, attrs, reqs

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        # A padding mode other than zeros is an F.pad call before the convolution (forward), converted as such.
        mode = attrs.get("padding_mode", "zeros")  # transposed convolutions have none
        return () if mode == "zeros" else (pad_feature(mode, ranks[0], self.n),)

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        padding = attrs["padding"]
        if attrs["padding_mode"] != "zeros":
            # What nn.Conv*d does for non-zero padding modes: pad explicitly, then convolve unpadded.
            x = F.pad(x, torch_pad(padding), mode=attrs["padding_mode"])
            padding = 0
        return type(self).fn(x, w, b, stride=attrs["stride"], padding=padding, dilation=attrs["dilation"],
                             groups=attrs["groups"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        x, *weights = args  # weight, then the bias when attrs["bias"]
        padding = attrs["padding"]
        if attrs["padding_mode"] != "zeros":
            x = call(functional_source(F.pad), [x], torch_pad(padding), mode=attrs["padding_mode"])
            padding = 0
        return call(functional_source(type(self).fn), [x, *weights], stride=attrs["stride"], padding=padding,
                    dilation=attrs["dilation"], groups=attrs["groups"])

    onnx_since = 11  # Pad's pads as an input (padding modes)
    onnx_types = ORT_CONV

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        mode = attrs["padding_mode"]
        if mode == "circular" and call.opset < 19:
            return None  # Pad's wrap mode is new in 19
        _, w, *bias = call.inputs
        kernel = call.in_types[1].shape[2:]
        begins, ends = self.onnx_pads(attrs, kernel)

        def conv(x: str, out: str) -> None:
            pads = begins + ends
            if mode != "zeros":  # what nn.Conv*d does: pad explicitly, then convolve unpadded
                x = call.node("Pad", [x, call.ints([0, 0, *begins, 0, 0, *ends])], mode=PAD_MODES[mode])
                pads = [0] * len(pads)
            call.node("Conv", [x, w, *bias], [out], kernel_shape=list(kernel), strides=list(attrs["stride"]),
                      pads=pads, dilations=list(attrs["dilation"]), group=attrs["groups"])

        return batched(call, self.n, conv)

    def onnx_pads(self, attrs: AttrMap, kernel: Sequence[int]) -> tuple[list[int], list[int]]:
        """Begin and end pads per spatial dim; "same" puts the odd one at the end, as torch does."""
        padding = attrs["padding"]
        if padding == "valid":
            return [0] * self.n, [0] * self.n
        if padding == "same":
            totals = [d * (k - 1) for d, k in zip(attrs["dilation"], kernel, strict=True)]
            return [t // 2 for t in totals], [t - t // 2 for t in totals]
        return list(padding), list(padding)


class ConvTransposeND(ConvND):
    """Transposed convolution; the weight is [C_in, C_out/groups, *k]."""

    onnx_core = "ConvTranspose"

    def channels(self, ctx: BuildContext, c_in: Dim, w: SymTensor) -> tuple[Any, Dim, list[z3.BoolRef]]:
        groups = ctx.choice("groups", GROUP_OPTIONS)
        if groups == "depthwise":
            mult = ctx.choice("depth_multiplier", (1, 2))
            return c_in, c_in * mult, [w.shape[0] == c_in, w.shape[1] == mult]
        return groups, w.shape[1] * groups, [w.shape[0] == c_in, c_in % groups == 0]

    def geometry(self, ctx, spatial, kernel, dilation) -> tuple[tuple[Dim, ...], dict, list[z3.BoolRef]]:
        n = self.n
        stride = spatial_attrs(ctx, "stride", n, 1, 3)
        pads = spatial_attrs(ctx, "padding", n, 0, 3)
        out_pads = spatial_attrs(ctx, "output_padding", n, 0, 2)
        # torch: output_padding must be smaller than either the stride or the dilation.
        reqs = [z3.Or(op < s, op < d) for op, s, d in zip(out_pads, stride, dilation, strict=True)]
        sizes = tuple(
            (size - 1) * s - 2 * p + d * (k - 1) + op + 1
            for size, k, s, p, d, op in zip(spatial, kernel, stride, pads, dilation, out_pads, strict=True)
        )
        return sizes, {"stride": stride, "padding": pads, "output_padding": out_pads}, reqs

    def forward(self, attrs: AttrMap, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return type(self).fn(x, w, b, stride=attrs["stride"], padding=attrs["padding"],
                             output_padding=attrs["output_padding"], groups=attrs["groups"],
                             dilation=attrs["dilation"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(functional_source(type(self).fn), args, stride=attrs["stride"], padding=attrs["padding"],
                    output_padding=attrs["output_padding"], groups=attrs["groups"], dilation=attrs["dilation"])

    onnx_since = 11

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        if any(op >= s for op, s in zip(attrs["output_padding"], attrs["stride"], strict=True)):
            return None  # torch also takes output_padding < dilation; ONNX Runtime wants it below the stride
        _, w, *bias = call.inputs
        pads = list(attrs["padding"]) * 2

        def conv_transpose(x: str, out: str) -> None:
            call.node("ConvTranspose", [x, w, *bias], [out], kernel_shape=list(call.in_types[1].shape[2:]),
                      strides=list(attrs["stride"]), pads=pads, dilations=list(attrs["dilation"]),
                      output_padding=list(attrs["output_padding"]), group=attrs["groups"])

        return batched(call, self.n, conv_transpose)


def _conv(name: str, n: int, fn: Any, base: type[ConvND] = ConvND) -> type[ConvND]:
    # Unbatched (C, *spatial) or batched (N, C, *spatial) input.
    return type(name, (base,), {"name": name, "n": n, "fn": staticmethod(fn), "ranks": ((n + 1, n + 2),)})


OPS: list[type[OpSpec]] = [
    _conv("conv1d", 1, F.conv1d),
    _conv("conv2d", 2, F.conv2d),
    _conv("conv3d", 3, F.conv3d),
    _conv("conv_transpose1d", 1, F.conv_transpose1d, ConvTransposeND),
    _conv("conv_transpose2d", 2, F.conv_transpose2d, ConvTransposeND),
    _conv("conv_transpose3d", 3, F.conv_transpose3d, ConvTransposeND),
]
