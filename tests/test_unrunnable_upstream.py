"""An ONNX tool is given an upstream model that ONNX Runtime cannot load (a kernel it lacks: Abs on bfloat16): the
tool still runs on it, so its crash is its bug, while a model it writes validly ends the test as the upstream's
failure, labelled as transformed. The faults are planted through the registry."""

from __future__ import annotations

import hand_graphs
import numpy as np
import onnx
import pytest

from fuzzer.cases.case import case_from_result, case_log, collect_versions
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions
from fuzzer.check.source import prepare
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import TRANSFORMED_UNRUN, OnnxPassConverter, UpstreamOptions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from oracles.verdict import Stage, Symptom

FAST = CheckOptions(rerun=False, locate=False, culprit=False)
EXPORTED = {"upstream": "torch-onnx-script", "opset": 17}


class PlantedTool(OnnxPassConverter):
    """What the planted ONNX tools below share."""

    libraries = ("onnxruntime",)
    distributions = ("onnx", "onnxruntime")
    options_type = UpstreamOptions


class FaultyOnAbs(PlantedTool):
    """An ONNX tool that fails on any model holding an Abs node."""

    name = "faulty-on-abs"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(node.op_type == "Abs" for node in model.graph.node):
            raise ValueError("no rule for op_type: Abs")
        return model


class Identity(PlantedTool):
    """An ONNX tool that gives the model back as it is."""

    name = "identity-tool"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        return model


class LacksKernelToo(PlantedTool):
    """An ONNX tool that runs ONNX Runtime itself (as onnxsim does to fold constants) and passes on its error."""

    name = "lacks-kernel-too"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        raise RuntimeError("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Abs(13)")


class InvalidOutput(PlantedTool):
    """An ONNX tool that writes a model whose node reads a tensor nothing makes."""

    name = "invalid-output"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        model.graph.node[0].input[0] = "nowhere"
        return model


def abs_bfloat16() -> Graph:
    b = GraphBuilder()
    x = b.input((3, 4), DType.BFLOAT16)
    return b.build((b.op("abs", (x,), (3, 4), DType.BFLOAT16),))


def test_a_tool_that_crashes_on_a_model_onnx_runtime_cannot_load_is_found_with_the_model_it_was_given() -> None:
    graph, tool = abs_bfloat16(), FaultyOnAbs()
    result = check_prepared(prepare(graph, 5, {}, 1.0), tool, EXPORTED, FAST)
    verdict = result.verdict
    assert (verdict.symptom, verdict.stage, verdict.converter) == (Symptom.CRASH, Stage.GRAPH_OPTIMIZATION, tool.name)
    assert "no rule for op_type: Abs" in verdict.message
    case = case_from_result(result, graph, 5, tool.name, collect_versions(()), log=case_log(result))
    given = onnx.load_from_string(case.upstream_model)  # kept for the case, though no run was made of it
    assert [n.op_type for n in given.graph.node] == ["Abs"]


def test_repro_py_runs_the_tool_before_the_model_onnx_runtime_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """repro.py's conversion of an ONNX tool's case: the tool's error shows, not ONNX Runtime's on upstream.onnx."""
    import fuzzer.cases.harness.from_upstream as harness

    def planted(model: onnx.ModelProto) -> onnx.ModelProto:
        raise ValueError("no rule for op_type: Abs")

    monkeypatch.setattr(harness, "transform", planted)
    upstream = hand_graphs.one_node_model("Abs", onnx.TensorProto.BFLOAT16, [3, 4], 17).SerializeToString()
    with pytest.raises(ValueError, match="no rule for op_type: Abs"):
        harness.transform_upstream(upstream, [np.zeros((3, 4), np.float32)])


def test_a_valid_model_written_from_it_ends_as_the_upstreams_failure_labelled_transformed() -> None:
    result = check_prepared(prepare(abs_bfloat16(), 5, {}, 1.0), Identity(), EXPORTED, FAST)
    verdict = result.verdict
    assert verdict.stage is Stage.SOURCE and "upstream:torch-onnx-script" in verdict.labels
    assert "NOT_IMPLEMENTED" in verdict.message
    assert TRANSFORMED_UNRUN in verdict.labels


def test_an_invalid_model_written_from_it_is_the_tools_bug() -> None:
    result = check_prepared(prepare(abs_bfloat16(), 5, {}, 1.0), InvalidOutput(), EXPORTED, FAST)
    assert (result.verdict.symptom, result.verdict.stage) == (Symptom.INVALID_MODEL, Stage.VALIDATION)
    assert result.verdict.converter == "invalid-output"


def test_a_tool_failing_where_onnx_runtime_lacks_the_kernel_is_not_judged() -> None:
    result = check_prepared(prepare(abs_bfloat16(), 5, {}, 1.0), LacksKernelToo(), EXPORTED, FAST)
    assert result.verdict.stage is Stage.SOURCE and "upstream:torch-onnx-script" in result.verdict.labels
    assert TRANSFORMED_UNRUN not in result.verdict.labels
