"""Tensors made after another's shape and dtype: zeros_like, ones_like, full_like (ONNX: ConstantOfShape of Shape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from generators.dtypes import ALL, DType
from generators.ops.base import (
    ANY_RANK,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    call,
    same_sigs,
)
from generators.ops.onnx_nodes import OnnxCall
from generators.ops.tf_sources import TF_ALL, like

# The fill values full_like picks from, by kind of dtype (every one is exact in every dtype of its kind).
FLOAT_FILLS = (0.5, -1.0, 2.0, 0.0)
INT_FILLS = (1, -3, 7, 0)
UINT8_FILLS = (1, 3, 7, 0)


class Like(OpSpec):
    """A tensor of the input's shape and dtype, every element `fill` (the input's values are never read)."""

    family = "like"
    ranks = (ANY_RANK,)
    sigs = same_sigs(ALL)
    fn: ClassVar[Any]
    onnx_since = 9  # ConstantOfShape
    onnx_types = frozenset(ALL) - {DType.BFLOAT16}

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        return Build([SymTensor(x.shape, x.dtype)], [], self.fill_attrs(ctx, x.dtype))

    def fill_attrs(self, ctx: BuildContext, dtype: DType) -> dict[str, Any]:
        return {}

    def fill(self, attrs: AttrMap) -> Any:
        raise NotImplementedError

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(f"torch.{self.name}", args)

    tf_types = TF_ALL

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        (x,) = args
        return f"tf.fill(tf.shape({x}), {like(self.fill(attrs), x)})"

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        value = numpy_helper.from_array(np.asarray([self.fill(attrs)], dtype=call.dtype.numpy))
        call.node("ConstantOfShape", [call.node("Shape", [call.inputs[0]])], call.outputs, value=value)
        return call.nodes


class ZerosLike(Like):
    name = "zeros_like"
    fn = staticmethod(torch.zeros_like)
    value_range = (0.0, 0.0)
    emits_zeros = True
    keeps_zeros = True

    def fill(self, attrs: AttrMap) -> Any:
        return 0


class OnesLike(Like):
    name = "ones_like"
    fn = staticmethod(torch.ones_like)
    value_range = (1.0, 1.0)

    def fill(self, attrs: AttrMap) -> Any:
        return 1


class FullLike(Like):
    """torch.full_like with a fill value exact in the dtype (True/False for bools)."""

    name = "full_like"
    emits_zeros = True  # a fill of 0

    def fill_attrs(self, ctx: BuildContext, dtype: DType) -> dict[str, Any]:
        if dtype is DType.BOOL:
            return {"fill_value": ctx.choice("fill_value", (True, False))}
        fills = FLOAT_FILLS if dtype.is_float else UINT8_FILLS if dtype is DType.UINT8 else INT_FILLS
        return {"fill_value": ctx.choice("fill_value", fills)}

    def fill(self, attrs: AttrMap) -> Any:
        return attrs["fill_value"]

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(x, attrs["fill_value"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.full_like", args, attrs["fill_value"])


OPS: list[type[OpSpec]] = [ZerosLike, OnesLike, FullLike]
