"""A repro.py feeds a rank-0 input as rank 0: numpy's ascontiguousarray would make it shape (1,), and ONNX Runtime
then gives an Identity of it shape (1,) too, so the replayed case fails differently from the campaign's test."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from fuzzer.cases.harness.numpy_tensors import ort_value
from fuzzer.cases.harness.runtime import from_ort_value


def test_a_rank_0_input_stays_rank_0_through_the_harness_and_onnx_runtime() -> None:
    import onnxruntime as ort

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "scalar",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    value = ort_value(np.array(1.5, dtype=np.float32))
    assert value.shape() == []
    (y,) = session.run_with_ort_values(None, {"x": value})
    assert from_ort_value(y).shape == ()
    strided = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not C-contiguous: copied, in order
    assert ort_value(strided).numpy().tolist() == strided.tolist()
