"""ONNX Runtime's Python tools as ONNX tools. ort-transformers: its fusions fire on real pattern graphs, recorded
under the names the installed library gives them, and its model (ONNX Runtime's contrib operators, which ONNX's
checker rejects) is judged by ONNX Runtime's load. ort-shape-infer: the shapes it writes, its refusal."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from test_onnx_patterns import pattern_graph
from test_whose_bug import diagnosed

from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.ort_transformers import MODEL_TYPES, OrtTransformers, OrtTransformersOptions
from generators.registry import REGISTRY

TOOL = CONVERTERS["ort-transformers"]
NATIVE_BERT = {"upstream": "onnx-native", "opset": 17, "model_type": "bert"}


def test_an_rms_norm_pattern_is_fused_and_judged_by_onnx_runtime_not_onnx_checker() -> None:
    graph = pattern_graph(REGISTRY["pattern_rms_norm"], 0)
    assert graph is not None
    result = check_prepared(prepare(graph, 0, {}, 1.0), TOOL, NATIVE_BERT)
    assert result.target is not None and result.target.model is not None
    assert not result.verdict.is_bug, result.verdict
    assert "FusionSimplifiedLayerNormalization" in result.target.rewrites
    model = onnx.load_from_string(result.target.model)
    assert "SimplifiedLayerNormalization" in {node.op_type for node in model.graph.node}
    with pytest.raises(onnx.checker.ValidationError, match="SimplifiedLayerNormalization"):
        onnx.checker.check_model(model, full_check=True)  # ONNX Runtime's op in ONNX's domain: ORT alone runs it


def test_a_layer_norm_pattern_fires_the_layer_norm_fusion_under_the_bert_gpt2_and_clip_optimizers() -> None:
    graph = pattern_graph(REGISTRY["pattern_layer_norm"], 0)
    assert graph is not None
    prepared = prepare(graph, 0, {}, 1.0)
    for model_type in ("bert", "gpt2", "clip"):
        result = check_prepared(prepared, TOOL, {**NATIVE_BERT, "model_type": model_type})
        assert result.target is not None and not result.verdict.is_bug, (model_type, result.verdict)
        assert "FusionLayerNormalization" in result.target.rewrites, model_type


def test_the_fusion_list_is_read_from_the_installed_library() -> None:
    from onnxruntime.transformers.optimizer import MODEL_TYPES as LIBRARY_TYPES

    names = set(TOOL.rewrite_names())
    assert {"FusionLayerNormalization", "FusionSimplifiedLayerNormalization", "FusionGelu", "FusionAttention"} <= names
    out_of_reach = TOOL.rewrites_out_of_reach("cpu")
    assert set(out_of_reach) <= names
    assert "FusionNhwcConv" in out_of_reach and "FusionLayerNormalization" not in out_of_reach
    assert TOOL.rewrites_beyond_float() == {"FusionQOrderedAttention", "FusionQOrderedGelu",
                                            "FusionQOrderedLayerNormalization", "FusionQOrderedMatMul"}
    assert set(MODEL_TYPES) <= set(LIBRARY_TYPES)


def test_the_optimizer_leaves_the_model_it_is_given_as_it_was() -> None:
    graph = pattern_graph(REGISTRY["pattern_layer_norm"], 0)
    assert graph is not None
    result = check_prepared(prepare(graph, 0, {}, 1.0), CONVERTERS["onnxslim"], {"upstream": "onnx-native",
                                                                                "opset": 17})
    assert result.target is not None and result.target.baseline_model is not None
    received = onnx.load_from_string(result.target.baseline_model)
    before = received.SerializeToString()
    TOOL.transform(received, TOOL.options(NATIVE_BERT))  # type: ignore[arg-type]
    assert received.SerializeToString() == before


def test_symbolic_shape_inference_writes_every_tensors_shape_and_its_model_is_checked_by_onnx() -> None:
    """ort-shape-infer, ONNX Runtime's symbolic shape inference: on a model it handles, every intermediate gets its
    shape and the model passes ONNX's checker (Converter.onnx_checked, left on)."""
    infer = CONVERTERS["ort-shape-infer"]
    graph = pattern_graph(REGISTRY["pattern_layer_norm"], 0)
    assert graph is not None and infer.onnx_checked
    result = check_prepared(prepare(graph, 0, {}, 1.0), infer, {"upstream": "onnx-native", "opset": 17})
    assert result.target is not None and result.target.model is not None
    assert not result.verdict.is_bug, result.verdict
    model = onnx.load_from_string(result.target.model)
    written = {v.name for v in model.graph.value_info if v.type.tensor_type.HasField("shape")}
    intermediates = {out for node in model.graph.node for out in node.output} - {o.name for o in model.graph.output}
    assert intermediates and intermediates <= written


def test_symbolic_shape_inference_that_cannot_infer_a_shape_refuses_as_unsupported_and_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator it does not know: its documented refusal, which convsmith counts as unsupported; the model it saves
    beside the caller on the way out is written in a folder of its own, and nothing is left in the working folder."""
    infer = CONVERTERS["ort-shape-infer"]
    monkeypatch.chdir(tmp_path)
    node = helper.make_node("Mystery", ["x"], ["y"], domain="custom.domain")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("custom.domain", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(Exception, match="Incomplete symbolic shape inference") as raised:
        infer.transform(model, infer.options({}))  # type: ignore[arg-type]
    assert any(re.search(pattern, str(raised.value)) for pattern in infer.unsupported_messages)
    assert list(tmp_path.iterdir()) == []


class GeluMisfused(OrtTransformers):
    """The transformers optimizer with a planted fault in one fusion: the Gelu its Gelu fusion writes (only where
    FusionOptions.enable_gelu is on) becomes a Relu. Everything else is the real optimizer."""

    name = "planted-gelu-transformers"

    def transform(self, model: onnx.ModelProto, options: OrtTransformersOptions) -> onnx.ModelProto:
        fused = super().transform(model, options)
        for node in fused.graph.node:
            if node.domain == "com.microsoft" and node.op_type == "Gelu":
                node.op_type, node.domain = "Relu", ""
        return fused


def test_a_fault_in_one_fusion_is_blamed_on_the_fusion_flag_that_shows_it_alone() -> None:
    graph = pattern_graph(REGISTRY["pattern_gelu"], 0)
    assert graph is not None
    case = diagnosed(graph, GeluMisfused(), NATIVE_BERT, seed=0)
    assert case.blame is not None and case.blame.component.project == "ONNX Runtime"
    assert case.blame.component.name.endswith("the fusion `FusionOptions.enable_gelu` turns on")
    outcomes = {c.options["passes"][0]: c.outcome for c in case.cross_checks or () if c.options.get("passes")}
    assert outcomes["enable_gelu"] == "same bug"
    assert {flag for flag, outcome in outcomes.items() if outcome != "passes"} == {"enable_gelu"}
    assert case.workaround is not None and "FusionOptions.enable_gelu off" in case.workaround.setting
