"""A finding blamed on one rewrite shows, in its report, the model the rewrite received and what it made of it:
ONNX Runtime's bisected transformer (the model at the level with it disabled, then enabled) and onnxoptimizer's one
pass that shows the bug alone. Real library runs on a MatMul then Add, which both fuse into a Gemm."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from fuzzer.converters import CONVERTERS
from fuzzer.converters.capabilities import ShowsRewrite
from fuzzer.converters.culprit import Culprit, FoundBy
from fuzzer.converters.describe import FaultSite
from fuzzer.converters.rewrite_view import changed_ops, node_lines
from oracles.verdict import Stage


def matmul_add() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 4], [0.5] * 12)
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [1.0] * 4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def site(bisected: Culprit | None = None, passes: tuple[str, ...] = (), **options: object) -> FaultSite:
    alone = tuple(Culprit("onnxoptimizer", FoundBy.ALONE, name) for name in passes)
    return FaultSite(Stage.GRAPH_OPTIMIZATION, "MatMul", options=dict(options),
                     culprits=(*([bisected] if bisected else []), *alone))


def test_onnx_runtimes_bisected_transformer_is_shown_disabled_then_enabled() -> None:
    ort = CONVERTERS["ort-optimizer"]
    fusion = Culprit("ort-optimizer", FoundBy.BISECTION, "MatMulAddFusion", "basic")
    view = ort.rewrite_view(matmul_add(), site(fusion, level="all"))
    assert view is not None and view.rewrite == "graph transformer `MatMulAddFusion`" and view.error == ""
    assert "level basic" in view.before_is
    assert [line.split(" = ")[1].split("(")[0] for line in node_lines(view.before, 10)] == ["MatMul", "Add"]
    assert node_lines(view.after, 10) == ["y = Gemm(x, w, b)"]
    assert changed_ops(view) == "removed 1 Add, 1 MatMul; added 1 Gemm"
    level_only = Culprit("ort-optimizer", FoundBy.BISECTION, "", "basic")
    assert ort.rewrite_view(matmul_add(), site(level_only, level="all")) is None  # none isolated


def test_onnxoptimizers_one_pass_is_shown_on_the_model_it_received() -> None:
    tool = CONVERTERS["onnxoptimizer"]
    view = tool.rewrite_view(matmul_add(), site(passes=("fuse_matmul_add_bias_into_gemm",)))
    assert view is not None and view.rewrite == "pass `fuse_matmul_add_bias_into_gemm`"
    # The pass alone leaves the MatMul it read behind, unread: removing it is eliminate_deadend's job.
    assert changed_ops(view) == "removed 1 Add; added 1 Gemm"
    assert [n.op_type for n in onnx.load_from_string(view.after).graph.node] == ["MatMul", "Gemm"]
    assert tool.rewrite_view(matmul_add(), site(passes=("a", "b"))) is None  # no single pass shows it
    assert not isinstance(CONVERTERS["onnxsim"], ShowsRewrite)  # no view of its own


def test_a_long_model_is_cut_to_the_lines_asked_for() -> None:
    lines = node_lines(matmul_add(), 1)
    assert lines == ["xw = MatMul(x, w)", "... 1 more nodes"]
