#!/usr/bin/env python3
"""ONNX Runtime's FastGeluFusion removes a node another GELU still reads.

Two tanh-approximated GELUs (one spelled with x**3, one with x*x) share their `0.5 * x` Mul, as common-subexpression
elimination leaves them. At level extended, FastGeluFusion fuses one GELU and deletes the shared Mul, and the session
refuses the model it made ("Node input 'hx' is not a graph input ..."). With FastGeluFusion disabled the same model
loads. Run: python repro.py (exit 1 while the bug shows, 0 when it is fixed).
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def constant(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def model():
    rng = np.random.default_rng(0)
    initializers = [constant("three", 3.0), constant("k", 0.044715), constant("s", 0.7978845608028654),
                    constant("one", 1.0), constant("half", 0.5),
                    constant("w0", rng.random((4, 5))), constant("w1", rng.random((4, 5)))]
    nodes = [
        helper.make_node("Mul", ["half", "x"], ["hx"]),  # 0.5 * x, read by both GELUs
        # GELU 0: 0.5x * (1 + tanh(s * (x + k * x**3))), then a projection
        helper.make_node("Pow", ["x", "three"], ["cube"]),
        helper.make_node("Mul", ["k", "cube"], ["kc"]),
        helper.make_node("Add", ["x", "kc"], ["inner"]),
        helper.make_node("Mul", ["s", "inner"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["th"]),
        helper.make_node("Add", ["one", "th"], ["onep"]),
        helper.make_node("Mul", ["hx", "onep"], ["g0"]),
        helper.make_node("MatMul", ["g0", "w0"], ["y0"]),
        # GELU 1: 0.5x * (1 + tanh(s * x * (1 + k * x * x))), then a projection
        helper.make_node("Mul", ["k", "x"], ["kx"]),
        helper.make_node("Mul", ["kx", "x"], ["kxx"]),
        helper.make_node("Add", ["one", "kxx"], ["a1"]),
        helper.make_node("Mul", ["s", "x"], ["sx"]),
        helper.make_node("Mul", ["sx", "a1"], ["scaled1"]),
        helper.make_node("Tanh", ["scaled1"], ["th1"]),
        helper.make_node("Add", ["one", "th1"], ["onep1"]),
        helper.make_node("Mul", ["hx", "onep1"], ["g1"]),
        helper.make_node("MatMul", ["g1", "w1"], ["y1"]),
    ]
    graph = helper.make_graph(nodes, "shared_half_gelus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [3, 5]),
                               helper.make_tensor_value_info("y1", TensorProto.FLOAT, [3, 5])], initializers)
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(made, full_check=True)
    return made.SerializeToString()


def session(data, disabled):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)


def main():
    data = model()
    session(data, ["FastGeluFusion"])  # the same model, FastGeluFusion off: loads
    try:
        session(data, [])
    except Exception as exc:  # the bug: the fused model is invalid
        print(f"onnxruntime {ort.__version__}: BUG REPRODUCES: {str(exc).splitlines()[0]}")
        return 1
    print(f"onnxruntime {ort.__version__}: fixed (the session loads with FastGeluFusion on)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
