"""The edge-case classes: every detector of the registry on a small hand-made model, the classes of what a real
rewrite changed, and the labels a tool's replay records."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuzzer.converters.edge_classes import DETECTORS, EdgeClass, Match, classes_of, scope_of
from fuzzer.converters.rewrite_matches import changed_classes, changed_matches, model_keys, typed


def _model() -> onnx.ModelProto:
    """x: float16 [N, 4] (N dynamic); s: a scalar input; c: a constant with a zero, a negative and a NaN; e: an empty
    int64 constant. `a` = x + c is a graph output read by two nodes; an If's body holds one node."""
    c = numpy_helper.from_array(np.array([0, -1, np.nan, 1], np.float16), "c")
    e = numpy_helper.from_array(np.zeros(0, np.int64), "e")
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT16, ["N", 4])])
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Neg", ["a"], ["n"], name="neg"),
             helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
             helper.make_node("Reshape", ["m", "e"], ["z"], name="reshape", allowzero=1),
             helper.make_node("Flatten", ["r"], ["f"], name="flat", axis=(1 << 31) - 1),
             helper.make_node("Cast", ["s"], ["b"], name="cast", to=TensorProto.BOOL),
             helper.make_node("If", ["b"], ["i"], name="if", then_branch=body, else_branch=body)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["N", 4]),
              helper.make_tensor_value_info("s", TensorProto.FLOAT16, [])]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT16, None) for name in ("a", "n", "z", "f", "i")]
    graph = helper.make_graph(nodes, "edge", inputs, outputs, [c, e])
    return typed(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _match(*names: str) -> Match:
    model = _model()
    return Match(tuple(n for n in model.graph.node if n.name in names), scope_of(model.graph))


def _body_match() -> Match:
    model = _model()
    matches = changed_matches(model, set())  # nothing survives: every scope's nodes, the body's among them
    return next(m for m in matches if m.scope.depth == 1)


# One match per class where it holds: the registry's every entry is asked (test_every_detector_has_a_case).
POSITIVE = {
    EdgeClass.FLOAT16: lambda: _match("add"),
    EdgeClass.BOOL: lambda: _match("cast"),
    EdgeClass.INT64: lambda: _match("reshape"),
    EdgeClass.RANK0: lambda: _match("mul"),
    EdgeClass.RANK1: lambda: _typed_model(TensorProto.FLOAT),
    EdgeClass.BROADCAST: lambda: _match("mul"),
    EdgeClass.CONSTANT_OPERAND: lambda: _match("add"),
    EdgeClass.INPUT_OPERAND: lambda: _match("add"),
    EdgeClass.CONSTANT_ZERO: lambda: _match("add"),
    EdgeClass.CONSTANT_NEGATIVE: lambda: _match("add"),
    EdgeClass.CONSTANT_NONFINITE: lambda: _match("add"),
    EdgeClass.CONSTANT_EMPTY: lambda: _match("reshape"),
    EdgeClass.EXTREME_ATTRIBUTE: lambda: _match("flat"),
    EdgeClass.INTERMEDIATE_OUTPUT: lambda: _match("relu"),
    EdgeClass.SECOND_CONSUMER: lambda: _match("neg"),
    EdgeClass.IN_SUBGRAPH: _body_match,
    EdgeClass.DYNAMIC_DIM: lambda: _match("relu"),
}


def _typed_model(dtype: int) -> Match:
    x = helper.make_tensor_value_info("x", dtype, [3])
    y = helper.make_tensor_value_info("y", dtype, [3])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "t", [x], [y]))
    return Match(tuple(model.graph.node), scope_of(model.graph))


DTYPES = {EdgeClass.FLOAT32: TensorProto.FLOAT, EdgeClass.FLOAT64: TensorProto.DOUBLE,
          EdgeClass.BFLOAT16: TensorProto.BFLOAT16, EdgeClass.INT8: TensorProto.INT8,
          EdgeClass.UINT8: TensorProto.UINT8, EdgeClass.INT32: TensorProto.INT32}


def test_every_detector_has_a_case() -> None:
    assert set(POSITIVE) | set(DTYPES) == set(DETECTORS) == set(EdgeClass)


@pytest.mark.parametrize("cls", sorted(POSITIVE, key=lambda c: c.value))
def test_each_detector_finds_its_class(cls: EdgeClass) -> None:
    assert DETECTORS[cls](POSITIVE[cls]())


@pytest.mark.parametrize("cls", sorted(DTYPES, key=lambda c: c.value))
def test_each_dtype_detector_finds_its_dtype_alone(cls: EdgeClass) -> None:
    assert classes_of(_typed_model(DTYPES[cls])) == {cls, EdgeClass.RANK1, EdgeClass.INPUT_OPERAND}


def test_a_match_has_exactly_its_classes() -> None:
    assert classes_of(_match("add")) == {
        EdgeClass.FLOAT16, EdgeClass.CONSTANT_OPERAND, EdgeClass.INPUT_OPERAND, EdgeClass.CONSTANT_ZERO,
        EdgeClass.CONSTANT_NEGATIVE, EdgeClass.CONSTANT_NONFINITE, EdgeClass.INTERMEDIATE_OUTPUT,
        EdgeClass.SECOND_CONSUMER, EdgeClass.DYNAMIC_DIM, EdgeClass.BROADCAST}
    assert classes_of(_match("cast")) == {EdgeClass.FLOAT16, EdgeClass.BOOL, EdgeClass.RANK0, EdgeClass.INPUT_OPERAND}
    assert classes_of(Match((), scope_of(_model().graph))) == frozenset()


def test_a_node_outside_a_body_is_not_in_a_subgraph_and_the_if_is_not_counted_for_its_body() -> None:
    assert not DETECTORS[EdgeClass.IN_SUBGRAPH](_match("add"))
    model = _model()
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    for branch in changed.graph.node[-1].attribute:
        branch.g.node[0].op_type = "Neg"  # only the body changes: the If node itself counts as unchanged
    matches = changed_matches(model, model_keys(changed))
    assert [(m.scope.depth, [n.op_type for n in m.nodes]) for m in matches] == [(1, ["Identity"]), (1, ["Identity"])]


def test_the_classes_of_a_real_fold_read_before_and_after_it() -> None:
    import onnxoptimizer

    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float16), "w")
    params = [numpy_helper.from_array(np.array(v, np.float16), n)
              for n, v in (("sc", [1, 2]), ("bi", [0, 1]), ("me", [0, 0]), ("va", [1, 1]))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "sc", "bi", "me", "va"], ["y"])]
    graph = helper.make_graph(nodes, "cb", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 1, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 2, 2, 2])], [w, *params])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    after = onnxoptimizer.optimize(model, ["fuse_bn_into_conv"])
    assert changed_classes(typed(model), after) == {EdgeClass.FLOAT16, EdgeClass.CONSTANT_OPERAND,
                                                     EdgeClass.INPUT_OPERAND, EdgeClass.CONSTANT_ZERO}
