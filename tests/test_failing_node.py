"""A crash whose message names no operator is filed under the node the library was converting when it raised (the
node local of its innermost frame), so its root cause and title name a real operator."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import onnx
import pytest

from oracles.rootcause import UNLOCALIZED, verdict_root_cause
from oracles.taxonomy import Failure, failure_verdict
from oracles.verdict import Stage

PLANTED_LIBRARY = '''
def make_node(graph_node):
    shape = ()
    return shape[0]  # what onnx2tf's ReduceMin did on a rank-0 input: IndexError, no operator named


def convert(model):
    for node in model.graph.node:
        make_node(node)
'''


@pytest.fixture
def planted_library(tmp_path: Path):  # noqa: ANN201
    """A converter library installed where libraries live (a site-packages folder), converting node by node."""
    path = tmp_path / "site-packages" / "planted_converter.py"
    path.parent.mkdir()
    path.write_text(PLANTED_LIBRARY)
    spec = importlib.util.spec_from_file_location("planted_converter", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    sys.modules.pop("planted_converter", None)
    return module


def reduce_min_model() -> onnx.ModelProto:
    node = onnx.helper.make_node("ReduceMin", ["x"], ["y"], keepdims=0)
    graph = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])])
    return onnx.helper.make_model(graph)


def test_the_node_a_library_raised_on_names_the_root_cause(planted_library) -> None:
    with pytest.raises(IndexError) as raised:
        planted_library.convert(reduce_min_model())
    failure = Failure.of(Stage.NODE_CONVERSION, raised.value)
    assert failure.node_type == "ReduceMin"
    verdict = failure_verdict("onnx2tf", failure)
    assert verdict.message == "builtins.IndexError: tuple index out of range\n(failing node: op_type=ReduceMin)"
    cause = verdict_root_cause("onnx2tf", verdict, ("slice", "matmul", "amin"))
    assert cause.operator == "ReduceMin"
    assert cause.error_class == "IndexError: tuple index out of range"
    assert cause.title() == ("onnx2tf: ReduceMin crash at node conversion: IndexError: tuple index out of range")


def test_our_own_frames_and_foreign_objects_name_no_node() -> None:
    """Only a library's frames count, and only node kinds converters use (a torch.fx node's `op` is a kind of
    call, not an operator)."""
    def ours(node: object) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError) as raised:
        ours(reduce_min_model().graph.node[0])
    failure = Failure.of(Stage.NODE_CONVERSION, raised.value)
    assert failure.node_type == ""
    cause = verdict_root_cause("onnx2tf", failure_verdict("onnx2tf", failure), ("slice", "amin"))
    assert cause.operator == UNLOCALIZED
    assert cause.title() == "onnx2tf: one of slice, amin crash at node conversion: ValueError: no"


def test_a_value_declared_without_a_shape_names_the_node_that_makes_it() -> None:
    """ONNX's checker says only "Field 'shape' ... missing": symbolic shape inference's Reduce at opset 18 was filed
    four times under the torch operators that carried it."""
    from fuzzer.converters.runtime import validate

    model = onnx.helper.make_model(reduce_min_model().graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    model.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(onnx.checker.ValidationError) as raised:
        validate(model)
    failure = Failure.of(Stage.VALIDATION, raised.value)
    cause = verdict_root_cause("ort-shape-infer", failure_verdict("ort-shape-infer", failure), ("amin",))
    assert (cause.operator, cause.error_class) == ("ReduceMin", "ValidationError: Field 'shape' of 'type' is "
                                                   "required but missing.")
