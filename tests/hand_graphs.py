"""Small known graphs written by hand: smoke checks, converter tests, fault injection."""

from __future__ import annotations

import onnx
from onnx import helper

from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph


def conv_relu_add() -> Graph:
    """conv2d (3x3, pad 1, bias) -> relu -> add a second input."""
    g = GraphBuilder()
    x, other = g.input((1, 3, 8, 8)), g.input((1, 4, 8, 8))
    w, b = g.weight((4, 3, 3, 3)), g.weight((4,))
    conv = g.op("conv2d", (x, w, b), (1, 4, 8, 8), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1,
                bias=True, padding_mode="zeros")
    g.op("add", (g.op("relu", (conv,), (1, 4, 8, 8)), other), (1, 4, 8, 8))
    return g.build()


def conv_relu() -> Graph:
    """conv2d (3x3, pad 1, stride 1, no bias) -> relu."""
    g = GraphBuilder()
    x, w = g.input((1, 2, 6, 6)), g.weight((3, 2, 3, 3))
    conv = g.op("conv2d", (x, w), (1, 3, 6, 6), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1,
                bias=False, padding_mode="zeros")
    g.op("relu", (conv,), (1, 3, 6, 6))
    return g.build()


def elementwise() -> Graph:
    """exp, tanh, mul, sub: the unary/binary families only."""
    g = GraphBuilder()
    a, b = g.input((3, 5)), g.input((3, 5))
    t = g.op("tanh", (g.op("mul", (a, b), (3, 5)),), (3, 5))
    g.op("sub", (g.op("exp", (t,), (3, 5)), b), (3, 5))
    return g.build()


def sub_permute() -> Graph:
    """sub (non-commutative) then a 2-D permute of a square result."""
    g = GraphBuilder()
    a, b = g.input((4, 4)), g.input((4, 4))
    g.op("permute", (g.op("sub", (a, b), (4, 4)),), (4, 4), perm=(1, 0), contiguous=False)
    return g.build()


def hardtanh_cast() -> Graph:
    """hardtanh (an ONNX Clip) on a scaled input, and a float16 cast of the result."""
    g = GraphBuilder()
    a = g.input((2, 6))
    scaled = g.op("mul", (a, g.input((2, 6))), (2, 6))
    clipped = g.op("hardtanh", (scaled,), (2, 6), min_val=-0.5, max_val=0.5)
    g.op("cast_float16", (clipped,), (2, 6), DType.FLOAT16, to="float16")
    return g.build()


def pad_tanh() -> Graph:
    """Constant padding of the last two dims, then tanh."""
    g = GraphBuilder()
    a = g.input((1, 2, 3, 3))
    padded = g.op("pad_constant", (a,), (1, 2, 5, 7), pad=(2, 2, 1, 1), mode="constant", value=0.5)
    g.op("tanh", (padded,), (1, 2, 5, 7))
    return g.build()


def layer_norm_tanh() -> Graph:
    """layer_norm over the last dim (weight and bias, eps 1e-5) then tanh: an ONNX LayerNormalization."""
    g = GraphBuilder()
    a = g.input((2, 3, 8))
    w, b = g.weight((8,)), g.weight((8,))
    normed = g.op("layer_norm", (a, w, b), (2, 3, 8), normalized_dims=1, affine="weight_bias", eps=1e-5)
    g.op("tanh", (normed,), (2, 3, 8))
    return g.build()


def one_node_model(op_type: str, elem_type: int, shape: list[int], opset: int) -> onnx.ModelProto:
    """An ONNX model of one unary node, y = op_type(x), both of `elem_type` and `shape`."""
    x = helper.make_tensor_value_info("x", elem_type, shape)
    y = helper.make_tensor_value_info("y", elem_type, shape)
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
