"""onnxscript's optimizer and its fusions for ONNX Runtime, and onnx-graphsurgeon, as ONNX tools: each rewrites real
pattern graphs with the installed library, records what fired under the library's own names, and leaves the model
it is given as it was."""

from __future__ import annotations

import onnx
import pytest
from test_onnx_patterns import pattern_graph

from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from generators.registry import REGISTRY

NATIVE = {"upstream": "onnx-native", "opset": 17}


def _tool_on_pattern(tool: str, pattern: str, options: dict[str, object] | None = None) -> tuple[
        tuple[str, ...], onnx.ModelProto, bytes]:
    """The rewrites `tool` fired on `pattern`'s native model, the model it made, and the model it received."""
    graph = pattern_graph(REGISTRY[pattern], 0)
    assert graph is not None
    result = check_prepared(prepare(graph, 0, {}, 1.0), CONVERTERS[tool], {**NATIVE, **(options or {})})
    assert result.target is not None and result.target.model is not None and result.target.baseline_model
    assert not result.verdict.is_bug, result.verdict
    return result.target.rewrites, onnx.load_from_string(result.target.model), result.target.baseline_model


def _ops(model: onnx.ModelProto) -> set[str]:
    return {node.op_type for node in model.graph.node}


def test_onnxscript_optimizer_folds_batch_norm_into_the_conv_and_names_the_rule() -> None:
    fired, model, received = _tool_on_pattern("onnxscript-optimizer", "pattern_conv_bn")
    assert "FuseBatchNormIntoConv" in fired
    assert "BatchNormalization" in _ops(onnx.load_from_string(received))
    assert "BatchNormalization" not in _ops(model) and "Conv" in _ops(model)


def test_onnxscript_optimizer_once_still_folds_a_transpose_pair() -> None:
    fired, model, _ = _tool_on_pattern("onnxscript-optimizer", "pattern_transpose_inverse", {"num_iterations": 1})
    assert "TransposeTranspose" in fired and "Transpose" not in _ops(model)


def test_onnxscript_ort_fusions_writes_ort_gelu_judged_by_onnx_runtime_not_onnx_checker() -> None:
    tool = CONVERTERS["onnxscript-ort-fusions"]
    fired, model, _ = _tool_on_pattern(tool.name, "pattern_gelu")
    assert fired == ("gelu",) and not tool.onnx_checked
    assert any(node.op_type == "Gelu" and node.domain == "com.microsoft" for node in model.graph.node)


def test_onnxscript_ort_fusions_lists_the_fusions_its_library_counts() -> None:
    names = CONVERTERS["onnxscript-ort-fusions"].rewrite_names()
    assert names is not None
    assert {"gelu", "bias_gelu", "skip_layer_normalization", "rms_normalization", "attention", "sdpa"} <= set(names)


def test_graphsurgeon_folds_an_if_on_a_constant_and_cleans_up() -> None:
    fired, model, received = _tool_on_pattern("onnx-graphsurgeon", "pattern_constant_if")
    assert fired[:2] == ("fold_constants", "cleanup")
    assert "If" in _ops(onnx.load_from_string(received)) and "If" not in _ops(model)


def test_graphsurgeon_steps_are_its_listed_rewrites_in_order() -> None:
    assert CONVERTERS["onnx-graphsurgeon"].rewrite_names() == ("fold_constants", "cleanup", "toposort")


@pytest.mark.parametrize("tool", ["onnxscript-optimizer", "onnxscript-ort-fusions", "onnx-graphsurgeon"])
def test_the_tool_leaves_the_model_it_is_given_as_it_was(tool: str) -> None:
    _, _, received = _tool_on_pattern(tool, "pattern_layer_norm")
    given = onnx.load_from_string(received)
    converter = CONVERTERS[tool]
    converter.transform(given, converter.options(NATIVE))  # type: ignore[attr-defined]
    assert given.SerializeToString() == received


def test_a_wrong_graphsurgeon_option_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="partitioning='some'"):
        CONVERTERS["onnx-graphsurgeon"].options({**NATIVE, "partitioning": "some"})


def test_the_workarounds_tried_turn_one_option_each() -> None:
    from fuzzer.converters.setting import Hints

    optimizer = CONVERTERS["onnxscript-optimizer"]
    tried = optimizer.avoid_settings(optimizer.options(NATIVE), Hints())
    assert [s.description for s in tried] == ["num_iterations=1", "onnx_shape_inference=False"]
    surgeon = CONVERTERS["onnx-graphsurgeon"]
    tried = surgeon.avoid_settings(surgeon.options({**NATIVE, "partitioning": "recursive"}), Hints())
    assert [(s.description, s.options["fold_shapes"], s.options["partitioning"]) for s in tried] == [
        ("fold_shapes=False", False, "recursive")]
