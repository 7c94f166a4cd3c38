"""Which rewrites of onnxsim and of the dynamo exporter's optimizer fired, from replays on the real libraries:
onnxsim's default passes one at a time through its own core, onnxscript's rules and passes in its optimizer's
order."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS, onnxscript_rules
from fuzzer.converters.onnx_simplifier import CONSTANT_FOLDING, OnnxSimOptions
from generators.generator import GenOptions, generate


def _transposes_then_scale() -> onnx.ModelProto:
    """x -> Transpose -> Transpose (inverse) -> Identity -> Mul by a constant made of Add(c, c)."""
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[1, 0, 2]),
             helper.make_node("Transpose", ["a"], ["b"], perm=[1, 0, 2]),
             helper.make_node("Identity", ["b"], ["d"]),
             helper.make_node("Add", ["c", "c"], ["e"]),
             helper.make_node("Mul", ["d", "e"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor("c", TensorProto.FLOAT, [1], [2.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnxsim_lists_its_default_passes_and_names_those_that_change_the_graph() -> None:
    pytest.importorskip("onnxsim")
    onnxsim = CONVERTERS["onnxsim"]
    names = onnxsim.rewrite_names()
    assert {"fuse_consecutive_transposes", "eliminate_identity", CONSTANT_FOLDING} <= set(names)
    assert "nop" not in names
    model = _transposes_then_scale()
    assert onnxsim.fired(model, OnnxSimOptions()) == ("fuse_consecutive_transposes", "eliminate_identity",
                                                       CONSTANT_FOLDING)
    assert onnxsim.fired(model, OnnxSimOptions(perform_optimization=False)) == (CONSTANT_FOLDING,)


@pytest.mark.slow
def test_the_dynamo_optimizer_replay_names_its_rules_uniquely_and_records_what_fired() -> None:
    names = onnxscript_rules.rule_names()
    assert len(names) == len(set(names)) and {"FoldConstantsPass", "TransposeTranspose"} <= set(names)
    graph = generate(3, GenOptions(nodes=1, include_ops=("pattern_transpose_inverse",), dtypes=("float32",)))
    source = prepare(graph, 3, {}, 1.0)
    run = check_prepared(source, CONVERTERS["torch-onnx-dynamo"], {"optimize": True}).target
    assert run is not None and "TransposeTranspose" in run.rewrites and set(run.rewrites) <= set(names)
    off = check_prepared(source, CONVERTERS["torch-onnx-dynamo"], {"optimize": False}).target
    assert off is not None and off.rewrites == ()
