"""Three broadcast inputs in one call: addcmul, addcdiv (x + value * t1 op t2) and lerp."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
import torch

from generators.dtypes import FLOATS, SIGNED_INTS, DType
from generators.ops.base import (
    ANY_RANK,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    broadcast,
    call,
    same_sigs,
)
from generators.ops.onnx_nodes import ORT_NUMERIC, OnnxCall
from generators.ops.tf_sources import TF_NUMERIC

TINY = 1e-3


def broadcast3(a: SymTensor, b: SymTensor, c: SymTensor) -> tuple[tuple, list]:
    """The broadcast shape of three inputs and the requirements that make them broadcast."""
    ab, reqs = broadcast(a.shape, b.shape)
    shape, more = broadcast(ab, c.shape)
    return shape, reqs + more


class Ternary(OpSpec):
    """Three inputs of one dtype, broadcast together; the output keeps the dtype."""

    family = "ternary"
    ranks = (ANY_RANK, ANY_RANK, ANY_RANK)

    def build(self, ctx: BuildContext, x: SymTensor, a: SymTensor, b: SymTensor) -> Build:
        shape, reqs = broadcast3(x, a, b)
        return Build([SymTensor(shape, x.dtype)], reqs, self.attrs(ctx, x.dtype))

    def attrs(self, ctx: BuildContext, dtype: DType) -> dict[str, Any]:
        return {}


class AddCMul(Ternary):
    """x + value * t1 * t2; an integer tensor takes an integer value. ONNX: Mul, Mul, Add."""

    name = "addcmul"
    sigs = same_sigs(FLOATS + SIGNED_INTS + (DType.UINT8,), 3)

    def attrs(self, ctx: BuildContext, dtype: DType) -> dict[str, Any]:
        values = (1.0, 0.5, -2.0, 0.1) if dtype.is_float else ((1, 2, 3) if dtype is DType.UINT8 else (1, -2, 3))
        return {"value": ctx.choice("value", values)}

    def forward(self, attrs: AttrMap, x: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(x, t1, t2, value=attrs["value"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.addcmul", args, value=attrs["value"])

    tf_types = TF_NUMERIC
    tf_fn = "{x} + {value} * {y} * {z}"

    onnx_since = 1
    onnx_types = ORT_NUMERIC

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        x, t1, t2 = call.inputs
        scaled = call.node("Mul", [call.node("Mul", [t1, t2]), call.const(attrs["value"], call.dtype)])
        call.node("Add", [x, scaled], call.outputs)
        return call.nodes


class AddCDiv(Ternary):
    """x + value * t1 / t2: floats only (torch refuses integer division here), t2 kept away from zero."""

    name = "addcdiv"
    sigs = same_sigs(FLOATS, 3)
    nonzero_inputs = (2,)

    def attrs(self, ctx: BuildContext, dtype: DType) -> dict[str, Any]:
        return {"value": ctx.choice("value", (1.0, 0.5, -2.0, 0.1))}

    def domain_loss(self, attrs: AttrMap, x: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        return torch.relu(TINY - t2.float().abs()).sum()

    def forward(self, attrs: AttrMap, x: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        return torch.addcdiv(x, t1, t2, value=attrs["value"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.addcdiv", args, value=attrs["value"])

    tf_fn = "{x} + {value} * ({y} / {z})"


class Lerp(Ternary):
    """start + weight * (end - start) with a tensor weight (torch switches formulas at weight 0.5)."""

    name = "lerp"
    sigs = same_sigs(FLOATS, 3)

    def forward(self, attrs: AttrMap, start: torch.Tensor, end: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.lerp(start, end, weight)

    tf_fn = "{x} + {z} * ({y} - {x})"

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.lerp", args)


OPS: list[type[OpSpec]] = [AddCMul, AddCDiv, Lerp]
