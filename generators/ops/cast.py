"""Dtype casts `x.to(dtype)` between all nine element types, one op per target dtype.

One op per target because `build` is not told which signature the generator picked: with a single "cast"
op whose signatures share an input dtype, build could not know the output dtype it must declare.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import torch

from generators.dtypes import ALL, DType
from generators.ops import discontinuity as detectors
from generators.ops.base import ANY_RANK, AttrMap, Build, BuildContext, OpSpec, Sig, SymTensor, clamp_penalty
from generators.ops.onnx_nodes import ORT_NUMERIC, OnnxCall, element_type, elementwise
from generators.ops.tf_sources import TF_ALL, tf_dtype

# Cast converts between every dtype but bfloat16 (left out of native models: ONNX's reference evaluator cannot
# check it); float to integer truncates towards zero, as torch does, on the values the input search allows.
ORT_CASTABLE = ORT_NUMERIC | {DType.INT8, DType.UINT8, DType.BOOL}

# Values a float may hold before casting to the target; outside them the conversion is undefined in C++
# (float -> int) or overflows to inf (-> float16).
TARGET_RANGE: dict[DType, tuple[float, float]] = {
    DType.INT8: (-128.0, 127.0),
    DType.UINT8: (0.0, 255.0),
    DType.INT32: (-2.0**31, 2.0**31 - 256),
    DType.INT64: (-2.0**63, 2.0**63 - 2.0**20),
    DType.FLOAT16: (-65504.0, 65504.0),
}


class Cast(OpSpec):
    """`x.to(torch.<to>)`; the attribute "to" is widened to float64 in the float64 twin for float targets."""

    family = "cast"
    ranks = (ANY_RANK,)
    target: DType
    # Float to int truncates (ties at integers, undefined out of range); float to bool compares with 0.
    discontinuity = staticmethod(detectors.cast)  # a plain function: it must not bind to the op

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, self.target)], attrs={"to": self.target.value})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return x.to(DType(attrs["to"]).torch)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        (x,) = args
        return f"{x}.to({DType(attrs['to']).torch!r})"

    onnx_types = ORT_CASTABLE
    tf_types = TF_ALL

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        return f"tf.cast({args[0]}, {tf_dtype(attrs['to'])})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, "Cast", to=element_type(DType(attrs["to"])))

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor | None:
        bounds = TARGET_RANGE.get(self.target)
        if bounds is None or x.dtype == torch.bool:
            return None
        lo, hi = bounds
        if x.is_floating_point():
            return clamp_penalty(x, lo, hi)
        if self.target.is_int:
            return None  # int -> int wraps modulo 2**bits, which is defined behaviour
        # int -> float16: a resample request when a value would overflow to inf.
        return ((x < lo) | (x > hi)).sum().float()


def _cast(target: DType) -> type[Cast]:
    name = f"cast_{target.value}"
    sigs = tuple(Sig((d,), target) for d in ALL)
    # A cast to an integer or bool type truncates a whole interval to 0.
    emits_zeros = not target.is_float
    since = 13 if target in ORT_CASTABLE else None
    return type(name, (Cast,), {"name": name, "target": target, "sigs": sigs, "emits_zeros": emits_zeros,
                                "onnx_since": since})


OPS: list[type[OpSpec]] = [_cast(d) for d in ALL]
