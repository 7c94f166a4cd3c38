"""What an operator's ONNX counterpart is written with: one IR node's tensors as ONNX sees them, and a builder.

`OpSpec.to_onnx` hands the operator an `OnnxCall`; the operator appends its node(s) with `node`, makes constant
inputs (axes, shapes, bounds) with `const` and `ints`, and returns `call.nodes`. Intermediate tensors are named
after the IR node's first output, so they never clash with another node's. The opset-dependent spellings many
operators share (axes as an input or an attribute, Split's sizes, Clip's bounds) live here once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from generators.dtypes import DType
from generators.ir import TensorType

# The oldest opset the counterparts are written for: Squeeze/Unsqueeze/ReduceSum/Split take their axes and sizes
# as inputs from 13, and Softmax/LogSoftmax compute along one axis (not a 2-D coercion) from 13.
OLDEST_OPSET = 13

ELEMENT_TYPES: dict[DType, int] = {
    DType.FLOAT32: TensorProto.FLOAT, DType.FLOAT64: TensorProto.DOUBLE, DType.FLOAT16: TensorProto.FLOAT16,
    DType.BFLOAT16: TensorProto.BFLOAT16, DType.INT32: TensorProto.INT32, DType.INT64: TensorProto.INT64,
    DType.INT8: TensorProto.INT8, DType.UINT8: TensorProto.UINT8, DType.BOOL: TensorProto.BOOL,
}

# The dtypes ONNX Runtime's CPU kernels take for most float-only operators at every opset from 13 (Exp, Sqrt,
# Sigmoid, Softmax, ...), and for most arithmetic (Add, Mul, Max, ...).
ORT_FLOATS = frozenset({DType.FLOAT32, DType.FLOAT64, DType.FLOAT16})
ORT_NUMERIC = ORT_FLOATS | {DType.INT32, DType.INT64}


def element_type(dtype: DType) -> int:
    """The TensorProto element type of an IR dtype."""
    return ELEMENT_TYPES[dtype]


@dataclass
class OnnxCall:
    """One IR node as its ONNX counterpart sees it: tensor names and types, the opset, and the nodes made so far."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    in_types: tuple[TensorType, ...]
    out_types: tuple[TensorType, ...]
    opset: int
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    _made: int = 0

    @property
    def dtype(self) -> DType:
        """The dtype the operator is keyed by: its first input's, else its first output's."""
        return (self.in_types or self.out_types)[0].dtype

    @property
    def rank(self) -> int:
        """The first input's rank."""
        return self.in_types[0].rank

    def fresh(self, tag: str = "") -> str:
        """A new intermediate tensor name, unique within the graph."""
        self._made += 1
        return f"{self.outputs[0]}__{tag}{self._made}"

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | int | None = None,
             **attrs: Any) -> str:
        """Append one node (attributes whose value is None are left out); returns its first output, a fresh name
        unless `outputs` names them (an int: that many fresh names)."""
        if outputs is None or isinstance(outputs, int):
            outputs = [self.fresh(op_type.lower()) for _ in range(outputs or 1)]
        kept = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), **kept))
        return outputs[0]

    def const(self, value: Any, dtype: DType, shape: Sequence[int] | None = None) -> str:
        """A Constant node holding `value` as a tensor of `dtype` (reshaped to `shape` when given)."""
        array = np.asarray(value, dtype=dtype.numpy)
        if shape is not None:
            array = np.broadcast_to(array, tuple(shape)).copy()
        name = self.fresh("const")
        self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name)))
        return name

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant (axes, shapes, pads, sizes)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(len(values)), DType.INT64)

    def reduce(self, op_type: str, x: str, axes: Sequence[int] | None, keepdims: bool,
               out: str | None = None, axes_input_since: int = 18) -> str:
        """A Reduce* node over `axes` (None: every axis); axes are an input from `axes_input_since` (13 for
        ReduceSum, 18 for the others), an attribute before."""
        keep = int(keepdims)
        if axes is None:
            return self.node(op_type, [x], [out] if out else None, keepdims=keep)
        if self.opset >= axes_input_since:
            return self.node(op_type, [x, self.ints(axes)], [out] if out else None, keepdims=keep)
        if not axes:  # a rank-0 input: reducing no axis and every axis agree; make_node cannot type an empty list
            return self.node(op_type, [x], [out] if out else None, keepdims=keep)
        return self.node(op_type, [x], [out] if out else None, axes=list(axes), keepdims=keep)

    def squeeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        return self.node("Squeeze", [x, self.ints(axes)], [out] if out else None)

    def unsqueeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        return self.node("Unsqueeze", [x, self.ints(axes)], [out] if out else None)

    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        return self.node("Reshape", [x, self.ints(shape)], [out] if out else None)

    def split(self, x: str, sizes: Sequence[int], axis: int, outs: Sequence[str]) -> None:
        """Split into pieces of `sizes`: from opset 18 by `num_outputs` where the sizes are its even pieces
        (ceil-sized, the last one shorter), else by the sizes as an input."""
        count, total = len(sizes), sum(sizes)
        step = -(-total // count)
        even = [min(step, total - i * step) for i in range(count)]
        if self.opset >= 18 and count > 1 and list(sizes) == even and all(s > 0 for s in even):
            self.node("Split", [x], outs, axis=axis, num_outputs=count)
        else:
            self.node("Split", [x, self.ints(sizes)], outs, axis=axis)

    def clip(self, x: str, lo: Any, hi: Any, dtype: DType, out: str | None = None) -> str:
        """Clip to [lo, hi] (either may be None); the bounds are inputs of x's dtype (opset 11 and later)."""
        bounds = [self.const(b, dtype) if b is not None else "" for b in (lo, hi)]
        while bounds and bounds[-1] == "":
            bounds.pop()
        return self.node("Clip", [x, *bounds], [out] if out else None)


def elementwise(call: OnnxCall, op_type: str, **attrs: Any) -> list[onnx.NodeProto]:
    """The one node of an elementwise counterpart: the IR node's inputs and outputs, unchanged."""
    call.node(op_type, call.inputs, call.outputs, **attrs)
    return call.nodes


def axis_of(dim: int, rank: int) -> int:
    """A torch dim (possibly negative) as a non-negative axis."""
    return dim % rank if rank else 0


def batched(call: OnnxCall, spatial: int, body: Callable[[str, str], None]) -> list[onnx.NodeProto]:
    """`body(x, out)` writes a node over a batched (N, C, *spatial) input; an unbatched (C, *spatial) one, as torch
    takes too, gets a batch of one around it (Unsqueeze before, Squeeze after)."""
    x, out = call.inputs[0], call.outputs[0]
    if call.rank == spatial + 2:
        body(x, out)
        return call.nodes
    inner = call.fresh("batched")
    body(call.unsqueeze(x, [0]), inner)
    call.squeeze(inner, [0], out)
    return call.nodes


# F.pad's modes by their ONNX Pad names (wrap is ONNX's circular padding, from opset 19).
PAD_MODES = {"constant": "constant", "zeros": "constant", "reflect": "reflect", "replicate": "edge",
             "circular": "wrap"}
