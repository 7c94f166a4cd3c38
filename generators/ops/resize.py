"""Resizing: F.interpolate in every mode (by size or by scale factor), pixel_shuffle and pixel_unshuffle."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
import z3

from generators.dtypes import ALL, FLOATS, DType
from generators.ops.base import AttrMap, Build, BuildContext, Dim, OpSpec, SymTensor, call, functional_source, same_sigs
from generators.ops.conv import spatial_attrs

# Dyadic scales: size * scale is exact in double, so torch's floor(size * scale) equals the rational floor.
SCALES = (2, 3, 0.5, 1.5, 2.5, 0.75, 1.25, 0.25)
HALVES = (DType.FLOAT16, DType.BFLOAT16)


def scaled(size: Dim, scale: float) -> Dim:
    """floor(size * scale) as z3 integer arithmetic (sizes and scales are positive)."""
    frac = Fraction(scale)
    return size * frac.numerator / frac.denominator


class Interpolate(OpSpec):
    """F.interpolate in one mode over 1-3 spatial dims, by output size or per-dim scale factors."""
    preserves_values = True  # bicubic overshoots: see _interp

    family = "resize"
    mode: ClassVar[str]
    corners: ClassVar[bool] = False  # whether align_corners applies to the mode
    antialias: ClassVar[bool] = False

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        n = x.rank - 2
        attrs: dict[str, Any] = {"size": None, "scale_factor": None, "recompute_scale_factor": None}
        if ctx.choice("by", ("size", "scale")) == "size":
            attrs["size"] = spatial_attrs(ctx, "size", n, 1, 32)
            sizes = attrs["size"]
        else:
            attrs["scale_factor"] = tuple(ctx.choice(f"scale{i}", SCALES) for i in range(n))
            attrs["recompute_scale_factor"] = ctx.choice("recompute_scale_factor", (None, False, True))
            sizes = tuple(scaled(d, s) for d, s in zip(x.shape[2:], attrs["scale_factor"], strict=True))
        attrs["align_corners"] = ctx.choice("align_corners", (False, True)) if self.corners else None
        # The antialiased kernels have no float16/bfloat16 CPU implementation.
        attrs["antialias"] = self.antialias and x.dtype not in HALVES and ctx.choice("antialias", (False, True))
        reqs = []
        if attrs["antialias"] and x.dtype is DType.UINT8:
            # torch's uint8 antialiased kernel fails an internal assert on a 1x1 output of more than one channel
            # ("num_channels == unpacked_output.size(0)", torch 2.13 on CPU): eager itself refuses the graph.
            reqs.append(z3.Or(*[z3.BoolVal(s > 1) if isinstance(s, int) else s > 1 for s in sizes]))
        return Build([SymTensor(x.shape[:2] + tuple(sizes), x.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=attrs["size"], scale_factor=attrs["scale_factor"], mode=self.mode,
                             align_corners=attrs["align_corners"],
                             recompute_scale_factor=attrs["recompute_scale_factor"], antialias=attrs["antialias"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        # The arguments a model author writes: the ones that differ from F.interpolate's defaults.
        given = {"size": attrs["size"], "scale_factor": attrs["scale_factor"], "mode": self.mode,
                 "align_corners": attrs["align_corners"], "recompute_scale_factor": attrs["recompute_scale_factor"],
                 "antialias": attrs["antialias"] or None}
        return call(functional_source(F.interpolate), args, **{k: v for k, v in given.items() if v is not None})


def _interp(name: str, mode: str, spatial: tuple[int, ...], dtypes=FLOATS, **extra: Any) -> type[Interpolate]:
    attrs = {"name": name, "mode": mode, "sigs": same_sigs(dtypes), "ranks": (tuple(n + 2 for n in spatial),),
             "preserves_values": mode != "bicubic"}
    return type(name, (Interpolate,), attrs | extra)


class PixelShuffle(OpSpec):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r); pixel_unshuffle is the inverse."""
    preserves_values = True

    name = "pixel_shuffle"
    family = "resize"
    sigs = same_sigs(ALL)
    ranks = ((3, 4, 5),)

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        r = ctx.choice("upscale_factor", (2, 2, 3, 1))
        *lead, c, h, w = x.shape
        out = tuple(lead) + (c / (r * r), h * r, w * r)
        return Build([SymTensor(out, x.dtype)], [c % (r * r) == 0], {"upscale_factor": r})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.pixel_shuffle(x, attrs["upscale_factor"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(functional_source(F.pixel_shuffle), args, attrs["upscale_factor"])


class PixelUnshuffle(PixelShuffle):
    name = "pixel_unshuffle"

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        r = ctx.choice("downscale_factor", (2, 2, 3, 1))
        *lead, c, h, w = x.shape
        out = tuple(lead) + (c * r * r, h / r, w / r)
        return Build([SymTensor(out, x.dtype)], [h % r == 0, w % r == 0], {"downscale_factor": r})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return F.pixel_unshuffle(x, attrs["downscale_factor"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(functional_source(F.pixel_unshuffle), args, attrs["downscale_factor"])


WITH_UINT8 = FLOATS + (DType.UINT8,)
OPS: list[type[OpSpec]] = [
    _interp("interpolate_nearest", "nearest", (1, 2, 3), WITH_UINT8),
    _interp("interpolate_nearest_exact", "nearest-exact", (1, 2, 3), WITH_UINT8),
    _interp("interpolate_linear", "linear", (1,), corners=True),
    _interp("interpolate_bilinear", "bilinear", (2,), WITH_UINT8, corners=True, antialias=True),
    _interp("interpolate_bicubic", "bicubic", (2,), WITH_UINT8, corners=True, antialias=True),
    _interp("interpolate_trilinear", "trilinear", (3,), corners=True),
    _interp("interpolate_area", "area", (1, 2, 3)),
    PixelShuffle,
    PixelUnshuffle,
]
