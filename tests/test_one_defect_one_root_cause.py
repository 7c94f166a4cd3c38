"""One planted defect reached through three different source operators is one root cause: an exporter that leaves
every float16 output in float32 (the final Cast lost), found on amin, mean and sum alike."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.torch_onnx_script import TorchOnnxScript, export_script
from fuzzer.triage.grouping import group
from fuzzer.triage.model import Finding
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph


def float16_outputs_left_float32(model: onnx.ModelProto) -> onnx.ModelProto:
    """The planted fault: each float16 output computed as before, then widened to float32."""
    for output in model.graph.output:
        if output.type.tensor_type.elem_type == TensorProto.FLOAT16:
            inner = f"{output.name}_half"
            for node in model.graph.node:
                node.output[:] = [inner if o == output.name else o for o in node.output]
                node.input[:] = [inner if i == output.name else i for i in node.input]
            model.graph.node.append(onnx.helper.make_node("Cast", [inner], [output.name], to=TensorProto.FLOAT))
            output.type.tensor_type.elem_type = TensorProto.FLOAT
    return model


class LostFinalCast(TorchOnnxScript):
    name = "planted-lost-final-cast"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        steps = Steps()
        model = float16_outputs_left_float32(export_script(source, options, steps))  # type: ignore[arg-type]
        data = check_and_serialize(model, steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


def reduction(op: str) -> Graph:
    b = GraphBuilder()
    x = b.input((3, 5), DType.FLOAT16)
    return b.build((b.op(op, (x,), (3,), DType.FLOAT16, dim=[1], keepdim=False),))


def test_a_planted_dtype_defect_through_three_operators_is_one_root_cause() -> None:
    converter = LostFinalCast()
    findings = []
    for seed, op in enumerate(("amin", "mean", "sum")):
        graph = reduction(op)
        verdict = check_prepared(prepare(graph, seed, {}, 1.0), converter, {"opset": 17}).verdict
        assert verdict.symptom.json_name == "wrong_dtype" and verdict.diverging_op == op, verdict
        findings.append(Finding(verdict.signature, converter.name, verdict.stage.value, verdict.symptom.json_name,
                                verdict.message, verdict.diverging_op, tuple(graph.ops()), seed, 1, float(seed)))
    groups = group(findings, {})
    assert len(groups) == 1 and groups[0].hits == 3
    assert groups[0].cause.error_class == "float16 output given as float32"
    assert groups[0].cause.title() == ("planted-lost-final-cast: amin wrong dtype at node conversion: float16 output "
                                       "given as float32")
