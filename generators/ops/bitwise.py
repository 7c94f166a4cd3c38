"""Bitwise and/or/xor on ints and bools (broadcast), and shifts by a constant amount (`x << k`, `x >> k`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import onnx
import torch

from generators.dtypes import INTS, DType
from generators.ops.base import (
    ANY_RANK,
    BOOL_PROMOTES_TO_INT,
    AttrMap,
    BroadcastBinary,
    Build,
    BuildContext,
    OpSpec,
    Sig,
    SymTensor,
    excluded,
    literal,
    same_sigs,
)
from generators.ops.onnx_nodes import OnnxCall, elementwise
from generators.ops.tf_sources import TF_FLOATS, TF_NUMERIC

BITS = {DType.INT8: 8, DType.UINT8: 8, DType.INT32: 32, DType.INT64: 64}


class Bitwise(BroadcastBinary):
    """Two inputs of one int or bool dtype, broadcast together; output keeps the dtype."""

    family = "bitwise"
    sigs = same_sigs(INTS + (DType.BOOL,), 2)
    # The Python operator the op's lambda applies: `a & b`.
    symbol: ClassVar[str]

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        a, b = args
        return f"{a} {self.symbol} {b}"

    onnx_since = 18  # BitwiseAnd/Or/Xor
    onnx_types = frozenset(INTS + (DType.BOOL,))
    onnx_op: ClassVar[str]  # the ONNX logical op (And, Or, Xor) of bools; "Bitwise" + it for integers
    tf_types = TF_NUMERIC - TF_FLOATS  # tf.bitwise takes integers only (a bool's & is logical)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, self.onnx_op if call.dtype is DType.BOOL else f"Bitwise{self.onnx_op}")


def _bitwise(name: str, fn: Callable, symbol: str, onnx_op: str) -> type[Bitwise]:
    return type(name, (Bitwise,), {"name": name, "fn": staticmethod(fn), "symbol": symbol, "onnx_op": onnx_op,
                                   "tf_fn": f"tf.bitwise.bitwise_{name.removeprefix('bitwise_')}"})


class Shift(OpSpec):
    """`x << k` or `x >> k` with k in [0, bits - 1] (larger shifts are undefined in C++)."""

    family = "bitwise"
    ranks = (ANY_RANK,)
    sigs = tuple(Sig((d,), d) for d in INTS)
    dtype_exclusions = excluded((DType.BOOL,), BOOL_PROMOTES_TO_INT)
    fn: Callable[[torch.Tensor, int], torch.Tensor]
    # The Python operator the op's lambda applies: `x << k`.
    symbol: ClassVar[str]

    def build(self, ctx: BuildContext, x: SymTensor) -> Build:
        amount = ctx.int_attr("amount", 0, BITS[x.dtype] - 1)
        return Build([SymTensor(x.shape, x.dtype)], attrs={"amount": amount})

    def forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        return type(self).fn(x, attrs["amount"])

    overflow_spreads = False  # half of a uint8 input overflows a shift by one: downstream bugs stay visible

    def widened_forward(self, attrs: AttrMap, x: torch.Tensor) -> torch.Tensor:
        # A left shift that carries bits out of the type wraps in torch and may saturate elsewhere; ONNX's BitShift
        # does not say which, so the exact product tells the oracle where it overflowed.
        scale = 2.0 ** attrs["amount"]
        return x.to(torch.float64) * scale if self.direction == "LEFT" else torch.floor(x.to(torch.float64) / scale)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        (x,) = args
        return f"{x} {self.symbol} {literal(attrs['amount'])}"

    onnx_since = 11
    onnx_types = frozenset({DType.UINT8})  # BitShift is for unsigned integers only (torch's >> is arithmetic)
    direction: ClassVar[str]
    tf_types = TF_NUMERIC - TF_FLOATS

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        amount = call.const(attrs["amount"], DType.UINT8)
        call.node("BitShift", [call.inputs[0], amount], call.outputs, direction=self.direction)
        return call.nodes


def _shift(name: str, fn: Callable, symbol: str, direction: str) -> type[Shift]:
    tf_fn = f"tf.bitwise.{direction.lower()}_shift({{x}}, tf.cast({{amount}}, {{x}}.dtype))"
    return type(name, (Shift,), {"name": name, "fn": staticmethod(fn), "symbol": symbol, "direction": direction,
                                 "tf_fn": tf_fn})


OPS: list[type[OpSpec]] = [
    _bitwise("bitwise_and", lambda a, b: a & b, "&", "And"),
    _bitwise("bitwise_or", lambda a, b: a | b, "|", "Or"),
    _bitwise("bitwise_xor", lambda a, b: a ^ b, "^", "Xor"),
    _shift("bitwise_left_shift", lambda x, k: x << k, "<<", "LEFT"),
    _shift("bitwise_right_shift", lambda x, k: x >> k, ">>", "RIGHT"),
]
