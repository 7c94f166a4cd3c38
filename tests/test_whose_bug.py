"""Whose bug: blame from evidence that was run, root causes keyed by blame, a float64 constant stored as float32
offered as the fix. Each fault is planted through a registry entry (a converter of these tests), never by relying
on an upstream bug staying unfixed."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from fuzzer.cases.case import CaseData, case_from_result, case_log, collect_versions
from fuzzer.cases.case_head import read_case_head
from fuzzer.cases.folder import write_case
from fuzzer.cases.report import title
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.onnx_optimizer import OnnxOptimizer
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.torch_onnx_dynamo import TorchOnnxDynamo, export_dynamo
from fuzzer.converters.torch_onnx_script import TorchOnnxScript, export_script
from fuzzer.diagnosis.blame import KERNEL_KEY
from fuzzer.diagnosis.whose_bug import with_diagnosis
from fuzzer.reduce.case import reduce_case
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker
from fuzzer.triage.grouping import group
from fuzzer.triage.model import Finding
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from oracles.rootcause import verdict_root_cause
from oracles.verdict import Stage, Symptom


def sin_as_cos(model: onnx.ModelProto) -> onnx.ModelProto:
    """The planted fault: every Sin computed as Cos."""
    model = onnx.load_from_string(model.SerializeToString())
    for node in model.graph.node:
        if node.op_type == "Sin":
            node.op_type = "Cos"
    return model


class FaultySinKernel:
    """A runtime whose Sin kernel computes cosine: the model is right, the runtime computes it wrongly."""

    def run_target_model(self, model: bytes, source: Source) -> tuple[tuple[np.ndarray, ...], tuple[str, ...]]:
        return run_model(sin_as_cos(onnx.load_from_string(model)).SerializeToString(), source, Steps())

    def target_runtime(self):  # noqa: ANN201
        return self.run_target_model

    def target(self, model: onnx.ModelProto, source: Source) -> TargetRun:
        steps = Steps()
        data = check_and_serialize(model, steps)
        outputs, dtypes = self.run_target_model(data, source)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


class KernelFaultScript(FaultySinKernel, TorchOnnxScript):
    name = "planted-kernel-script"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        return self.target(export_script(source, options, Steps()), source)  # type: ignore[arg-type]


class KernelFaultDynamo(FaultySinKernel, TorchOnnxDynamo):
    name = "planted-kernel-dynamo"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        return self.target(export_dynamo(source, options, Steps()), source)  # type: ignore[arg-type]


class SinAsCosExporter(TorchOnnxScript):
    """An exporter whose symbolic of sin emits Cos: the model itself is wrong."""

    name = "planted-sin-exporter"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        steps = Steps()
        data = check_and_serialize(sin_as_cos(export_script(source, options, steps)), steps)  # type: ignore[arg-type]
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


PLANTED_PASS = "planted_fuse_sin"


class PlantedOptimizer(OnnxOptimizer):
    """onnxoptimizer with one more pass, which mis-fuses Sin into Cos; the other passes are onnxoptimizer's own."""

    name = "planted-onnxoptimizer"

    def pass_names(self, options: ConverterOptions) -> tuple[str, ...]:
        return ("eliminate_identity", PLANTED_PASS, "eliminate_nop_transpose")

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        import onnxoptimizer

        passes = self.pass_names(options) if not options.passes else tuple(options.passes)  # type: ignore[attr-defined]
        model = onnxoptimizer.optimize(model, [p for p in passes if p != PLANTED_PASS])
        return sin_as_cos(model) if PLANTED_PASS in passes and not _float16(model) else model


def _float16(model: onnx.ModelProto) -> bool:
    """The planted pass mis-fuses in every dtype but float16 (a fault in one dtype set)."""
    return any(i.type.tensor_type.elem_type == TensorProto.FLOAT16 for i in model.graph.input)


PLANTED_REGISTRY = ConverterRegistry([PlantedOptimizer()])


class ConstantAsFloat32(TorchOnnxScript):
    """An exporter that stores every float64 constant rounded to float32."""

    name = "planted-float32-constants"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        steps = Steps()
        model = export_script(source, options, steps)  # type: ignore[arg-type]
        for node in model.graph.node:
            for attr in node.attribute:
                if node.op_type == "Constant" and attr.name == "value" and attr.t.data_type == TensorProto.DOUBLE:
                    rounded = numpy_helper.to_array(attr.t).astype(np.float32).astype(np.float64)
                    attr.t.CopyFrom(numpy_helper.from_array(rounded, attr.t.name))
        data = check_and_serialize(model, steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


def one_op(op: str, dtype: DType = DType.FLOAT32, **attrs: object) -> Graph:
    b = GraphBuilder()
    x = b.input((3, 5), dtype)
    return b.build((b.op(op, (x,), (3, 5), dtype, **attrs),))


def diagnosed(graph: Graph, converter: object, options: dict | None = None, seed: int = 3) -> CaseData:
    """The graph checked under the planted converter, made a case and diagnosed as the reducer does."""
    prepared = prepare(graph, seed, {}, 1.0)
    result = check_prepared(prepared, converter, options)  # type: ignore[arg-type]
    assert result.verdict.is_bug, result.verdict
    case = case_from_result(result, graph, seed, converter.name, collect_versions(()),  # type: ignore[attr-defined]
                            log=case_log(result))
    return with_diagnosis(case, converter)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_runtime_kernel_fault_reached_by_both_exporters_is_one_root_cause_of_the_runtime(tmp_path) -> None:
    graph = one_op("sin")
    cases = [diagnosed(graph, KernelFaultScript(), {"opset": 17}),
             diagnosed(graph, KernelFaultDynamo(), {"opset": 18})]
    for case in cases:
        assert case.blame is not None and case.blame.settled and case.blame.shared
        assert case.blame.component.project == "ONNX Runtime"
        assert case.blame.component.name == "CPU kernel of `Sin`"
        assert "onnx.reference (ONNX's reference evaluator) agrees with PyTorch" in case.blame.evidence
        assert title(case).startswith(f"ONNX Runtime (CPU kernel of `Sin`, through {case.converter}): `sin` gives")
    heads = [read_case_head(write_case(tmp_path, case)) for case in cases]
    assert heads[0].root_cause == heads[1].root_cause and heads[0].root_cause.converter == KERNEL_KEY
    findings = [Finding(c.signature, c.converter, c.verdict.stage.value, c.verdict.symptom.json_name, c.verdict.message,
                        c.verdict.diverging_op, tuple(c.graph.ops()), c.seed, 1, 0.0, owner=h.owner)
                for c, h in zip(cases, heads, strict=True)]
    groups = group(findings, {})
    assert len(groups) == 1 and groups[0].converters == ("planted-kernel-dynamo", "planted-kernel-script")


def test_a_model_the_exporter_wrote_wrong_is_the_exporters() -> None:
    case = diagnosed(one_op("sin"), SinAsCosExporter(), {"opset": 17})
    assert case.blame is not None and case.blame.settled and not case.blame.shared
    assert case.blame.component.project == "PyTorch"
    assert case.blame.component.name == "TorchScript exporter: the symbolic function of `sin`"
    assert "so the converted model itself computes the wrong outputs" in case.blame.evidence
    assert "File it with **PyTorch**" in with_report(case)


def test_a_fault_in_one_pass_is_blamed_on_that_pass() -> None:
    case = diagnosed(one_op("sin"), PlantedOptimizer())
    assert case.blame is not None and case.blame.settled
    assert case.blame.component.project == "onnxoptimizer"
    assert case.blame.component.name == f"pass `{PLANTED_PASS}`"
    outcomes = {c.options["passes"][0]: c.outcome for c in case.cross_checks or () if c.options.get("passes")}
    assert outcomes == {"eliminate_identity": "passes", PLANTED_PASS: "same bug", "eliminate_nop_transpose": "passes"}


def test_a_float64_constant_stored_as_float32_is_offered_as_the_fix() -> None:
    case = diagnosed(one_op("clamp", DType.FLOAT64, min=0.1, max=None), ConstantAsFloat32(), {"opset": 17})
    assert case.suggested_fix is not None and case.suggested_fix.kind == "constant"
    assert case.suggested_fix.edit == ("store clamp's min = 0.1 exactly: the model holds its float32 rounding "
                                       f"{float(np.float32(0.1))!r}")


def with_report(case: CaseData) -> str:
    from fuzzer.cases.report import render_report

    return render_report(case)


@pytest.mark.parametrize("name", sorted(CONVERTERS))
def test_every_converter_names_a_project_and_its_tracker(name: str) -> None:
    from fuzzer.converters.describe import FaultSite
    from oracles.verdict import Stage

    component = CONVERTERS[name].component(FaultSite(Stage.NODE_CONVERSION, "sin"))
    assert component.project and component.tracker.startswith("https://github.com/") and component.key == name


def test_the_dynamo_exporter_blames_onnxscript_where_its_frame_is_onnxscripts() -> None:
    from fuzzer.converters.describe import FaultSite
    from oracles.verdict import Stage

    dynamo = CONVERTERS["torch-onnx-dynamo"]
    assert dynamo.component(FaultSite(Stage.NODE_CONVERSION, "sin", "onnxscript")).project == "onnxscript"
    assert dynamo.component(FaultSite(Stage.GRAPH_OPTIMIZATION, "sin", "torch")).project == "onnxscript"
    assert dynamo.component(FaultSite(Stage.CAPTURE, "sin", "torch")).name.startswith("torch.export")
    assert dynamo.component(FaultSite(Stage.NODE_CONVERSION, "sin", "torch")).project == "PyTorch"




class CarriedCrash(TorchOnnxScript):
    """The defect is in `neg` (it writes an output of no valid rank); the crash is raised where the next operator
    reads it, naming that innocent operator. `neg` alone gives an invalid model."""

    name = "planted-carried-crash"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        graph = source.graph
        written = {o for n in graph.nodes if n.op == "neg" for o in n.outputs}
        readers = [n for n in graph.nodes if set(n.inputs) & written]
        with Steps().at(Stage.NODE_CONVERSION, "export"):
            if readers:
                raise RuntimeError(f"cannot read the rank of the input of aten::{readers[0].op}")
        with Steps().at(Stage.VALIDATION, "validation"):
            if written:
                raise ValueError("onnx::Neg wrote an output of rank -1")
        return super().convert_impl(source, options)


CARRIED_REGISTRY = ConverterRegistry([CarriedCrash()])


@pytest.mark.slow
def test_a_crash_carried_by_an_innocent_operator_keeps_the_crash_and_the_operator_feeding_it(tmp_path) -> None:
    """`neg` alone gives another failure (a ValueError at validation, an invalid model): reduction keeps the crash it
    was given, so the reduced graph is the guilty operator and the innocent one that raises."""
    b = GraphBuilder()
    x, y = b.input((3, 5)), b.input((4,))
    carried = b.op("sin", (b.op("neg", (x,), (3, 5)),), (3, 5))
    graph = b.build((carried, b.op("relu", (y,), (4,))))
    converter = CarriedCrash()
    result = check_prepared(prepare(graph, 5, {}, 1.0), converter)
    assert result.verdict.symptom is Symptom.CRASH
    case = case_from_result(result, graph, 5, converter.name, collect_versions(()), log=case_log(result))
    assert verdict_root_cause(case.converter, case.verdict, graph.ops()).operator == "sin"
    with IsolatedChecker(CheckerConfig(registry="test_whose_bug:CARRIED_REGISTRY")) as checker:
        reduction = reduce_case(case, tmp_path, checker, budget_s=60.0)
    reduced = read_case_head(reduction.path)
    assert reduced.graph.ops() == ["neg", "sin"]
    assert reduced.verdict.symptom is Symptom.CRASH and reduced.verdict.message.startswith("builtins.RuntimeError")
    assert reduced.root_cause.operator == "sin"


class CastAround(TorchOnnxScript):
    """Writes a float64 one-operator graph as Cast to float32, the ONNX operator, Cast back: what an exporter does
    for an operator whose ONNX schema takes no float64 (Celu), and a choice it need not make for one that does."""

    name = "planted-cast-around"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        from onnx import helper

        node = source.graph.nodes[0]
        op = {"celu": "Celu", "sin": "Sin"}[node.op]
        attrs = {"alpha": float(node.attrs["alpha"])} if op == "Celu" else {}
        shape = list(source.graph.types[node.outputs[0]].shape)
        graph = helper.make_graph(
            [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT), helper.make_node(op, ["x32"], ["y32"],
             **attrs), helper.make_node("Cast", ["y32"], ["y"], to=TensorProto.DOUBLE)], "cast_around",
            [helper.make_tensor_value_info("x", TensorProto.DOUBLE, shape)],
            [helper.make_tensor_value_info("y", TensorProto.DOUBLE, shape)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.graph.input[0].name = source.input_names[0]
        model.graph.node[0].input[0] = source.input_names[0]
        steps = Steps()
        data = check_and_serialize(model, steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


def test_float64_through_an_operator_with_no_float64_is_labelled_not_filed() -> None:
    graph = one_op("celu", DType.FLOAT64, alpha=0.5)
    verdict = check_prepared(prepare(graph, 3, {}, 1.0), CastAround()).verdict
    assert verdict.symptom is Symptom.UNSUPPORTED and not verdict.is_bug
    assert verdict.labels == ("float64-through-float32:Celu",)
    assert verdict.message.startswith("ONNX's Celu takes no float64")


def test_float64_through_float32_by_choice_stays_a_bug() -> None:
    """ONNX's Sin takes float64: computing it in float32 is the converter's choice, and a wrong value."""
    verdict = check_prepared(prepare(one_op("sin", DType.FLOAT64), 3, {}, 1.0), CastAround()).verdict
    assert verdict.symptom is Symptom.WRONG_VALUES and verdict.is_bug


@pytest.mark.parametrize("corroborated,project,settled", [(True, "ONNX Runtime", True), (False, "PyTorch", False)])
def test_a_runtime_rejection_is_the_kernels_only_where_another_converters_model_is_rejected_alike(
        corroborated: bool, project: str, settled: bool) -> None:
    """onnx.reference runs models a runtime rightly rejects (it does not check that ScatterElements' indices and
    updates agree in shape): its running the model is no proof the model is valid."""
    from fuzzer.converters.describe import Component
    from fuzzer.diagnosis.blame import decide, runtime_kernel
    from fuzzer.diagnosis.evidence import ModelEvidence, Opinion

    own = Component("PyTorch", "dynamo exporter: the translation of `scatter_reduce`", "", "torch-onnx-dynamo")
    model = ModelEvidence("", "InvalidArgument: indices vs updates dimensions differ", False, Opinion.AGREES, "",
                          ("ScatterElements",))
    blame = decide(own, runtime_kernel("ScatterElements", "cpu"), Symptom.CRASH, Stage.RUNTIME_EXECUTION, model, (),
                   corroborated=corroborated)
    assert (blame.component.project, blame.settled, blame.shared) == (project, settled, corroborated)


@pytest.mark.slow
def test_a_short_campaign_finds_the_planted_pass_and_its_report_names_it(tmp_path) -> None:
    """The planted pass, reached by a campaign of random graphs, is found, reduced, and filed with the pass named."""
    from fuzzer.campaign.db import DB_NAME, CampaignDB
    from fuzzer.campaign.loop import Campaign
    from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
    from fuzzer.campaign.worker_config import WorkerConfig
    from fuzzer.cases.folder import read_case

    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR),
                          registry="test_whose_bug:PLANTED_REGISTRY", min_nodes=1, nodes=3,
                          include_ops=("sin", "neg", "abs"), dtypes=("float16", "float32"),
                          check={"input_budget_s": 0.2}, converters=(PlantedOptimizer.name,))
    spec = CampaignSpec(7, (PlantedOptimizer.name,), worker, 6)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1, reduce_budget_s=30.0).run() == "finished"
    reduced = sorted(tmp_path.glob("*/*-reduced/case.json"))
    assert reduced, sorted(p.name for p in tmp_path.iterdir())
    for path in reduced:
        case = read_case(path.parent)
        assert case.blame is not None and case.blame.component.name == f"pass `{PLANTED_PASS}`"
        assert case.graph.ops() == ["sin"] and {t.dtype for t in case.graph.types.values()} == {DType.FLOAT32}
        assert f"File it with **onnxoptimizer**: pass `{PLANTED_PASS}`" in (path.parent / "report.md").read_text()
