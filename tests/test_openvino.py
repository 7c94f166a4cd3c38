"""OpenVINO's two routes, its PyTorch frontend and its ONNX frontend, each on the CPU plugin: real conversions of small
graphs judged against PyTorch, their refusals counted as limits, the components a bug is filed under, and a planted
fault (every Sin of the frontend's model made a Cos, through OpenVINO's own graph API) taken by the check, a
campaign and the case's repro.py, which runs alone with openvino, numpy (and torch for the PyTorch route)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import hand_graphs
import pytest
import torch

from fuzzer.campaign.spec import case_folders
from fuzzer.cases.case import case_from_result, collect_versions
from fuzzer.check.pipeline import CheckOptions, check_prepared, prepare
from fuzzer.converters import CONVERTERS, ConverterRegistry, Role
from fuzzer.converters.capabilities import ExportsUpstream
from fuzzer.converters.conversion import Source, StageError, Steps, TargetRun
from fuzzer.converters.describe import FaultSite
from fuzzer.converters.openvino_cpu import PLUGIN_KEY, PRECISIONS, compile_and_run, computed_in, cpu_precisions
from fuzzer.converters.openvino_onnx import OpenVinoOnnx, OvOnnxOptions, model_feeds, read_onnx
from fuzzer.converters.openvino_pytorch import OpenVinoPytorch, OvPytorchOptions, convert_module
from fuzzer.converters.setting import Hints
from fuzzer.converters.upstream import export_upstream
from fuzzer.diagnosis.crosscheck import plan
from fuzzer.support.errors import Exit
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from oracles.taxonomy import Failure, classify
from oracles.verdict import Stage, Symptom

pytest.importorskip("openvino")

TESTS = Path(__file__).parent
ROOT = TESTS.parent
FAST_CHECK = CheckOptions(rerun=False, locate=False, culprit=False)
NAMES = ("openvino-pytorch", "openvino-onnx")


def sin_mul() -> Graph:
    """sin, then a product: the planted fault shows on the sin."""
    g = GraphBuilder()
    x, y = g.input((2, 3)), g.input((2, 3))
    g.op("mul", (g.op("sin", (x,), (2, 3)), y), (2, 3))
    return g.build()


def cos_for_sin(model: Any) -> Any:
    """The planted fault: every Sin of an ov.Model made a Cos of the same input."""
    import openvino.opset13 as ops

    for op in model.get_ordered_ops():
        if op.get_type_name() == "Sin":
            cos = ops.cos(op.input_value(0))
            for target in op.output(0).get_target_inputs():
                target.replace_source_output(cos.output(0))
    model.validate_nodes_and_infer_types()
    return model


class PlantedPytorch(OpenVinoPytorch):
    """openvino-pytorch with the planted fault in the frontend's model."""

    name = "planted-openvino-pytorch"

    def convert_impl(self, source: Source, options: OvPytorchOptions) -> TargetRun:
        steps = Steps()
        model = cos_for_sin(convert_module(source, options, steps))
        outputs, dtypes = compile_and_run(model, source.inputs, options.precision, options.performance, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings))


class PlantedOnnx(OpenVinoOnnx):
    """openvino-onnx with the planted fault in the frontend's model."""

    name = "planted-openvino-onnx"

    def convert_impl(self, source: Source, options: OvOnnxOptions) -> TargetRun:
        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps)
        model = cos_for_sin(read_onnx(up.data, options.reader))
        outputs, dtypes = compile_and_run(model, model_feeds(model, source), options.precision, options.performance,
                                          steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), baseline=up.outputs, baseline_model=up.data,
                         baseline_dtypes=up.output_dtypes)


REGISTRY = ConverterRegistry([*CONVERTERS.values(), PlantedPytorch(), PlantedOnnx()])
PLANTED = (PlantedPytorch.name, PlantedOnnx.name)


def test_both_routes_are_registered_with_their_roles_and_options() -> None:
    pytorch, onnx_route = CONVERTERS["openvino-pytorch"], CONVERTERS["openvino-onnx"]
    assert (pytorch.role, pytorch.framework, pytorch.runtime) == (Role.EXPORTER, "pytorch", "openvino")
    assert (onnx_route.role, onnx_route.framework, onnx_route.runtime) == (Role.IMPORTER, "onnx", "openvino")
    assert not isinstance(pytorch, ExportsUpstream) and pytorch.info().available and onnx_route.info().available
    assert "openvino" in pytorch.versions() and "openvino" in onnx_route.versions()
    assert pytorch.options().to_json() == {"precision": "f32", "performance": "LATENCY", "capture": "trace",
                                           "static_shapes": False}
    assert onnx_route.options().to_json() == {"precision": "f32", "performance": "LATENCY",
                                              "upstream": "torch-onnx-script", "opset": 17, "reader": "read_model"}
    with pytest.raises(ValueError, match="precision"):
        onnx_route.options({"precision": "f64"})


def test_bf16_is_drawn_only_where_the_cpu_computes_in_it() -> None:
    supported = cpu_precisions()
    assert supported[0] == "f32" and set(supported) <= set(PRECISIONS)
    for options_type in (OvPytorchOptions, OvOnnxOptions):
        drawn = {options_type.draw(seed).to_json()["precision"] for seed in range(40)}
        assert drawn == set(supported), options_type.__name__


@pytest.mark.parametrize("name", NAMES)
def test_a_frontend_without_a_translation_is_a_limit_not_a_bug(name: str) -> None:
    converter = CONVERTERS[name]
    refused = Failure(Stage.NODE_CONVERSION, "openvino._pyopenvino.OpConversionFailure", "Check 'false' failed at "
                      "unconverted_ops_report.cpp:151: FrontEnd API failed with OpConversionFailure: Model wasn't "
                      "fully converted. Summary: -- No conversion rule found for operations: aten::special_bessel_j0",
                      "")
    assert classify(refused, converter.unsupported_messages) is Symptom.UNSUPPORTED
    dynamic_rank = Failure(Stage.RUNTIME_LOAD, "builtins.RuntimeError", "Check '!shape.rank().is_dynamic()' failed at "
                           "src/plugins/intel_cpu/src/node.cpp:108: Unexpected: CPU plug-in doesn't support Squeeze "
                           "operation with dynamic rank. Operation name: aten::squeeze/Squeeze", "")
    assert classify(dynamic_rank, converter.unsupported_messages) is Symptom.UNSUPPORTED
    wrap = Failure(Stage.NODE_CONVERSION, "builtins.RuntimeError", "Failed operations detailed log: -- Pad-19 with a "
                   "message: Exception from src/frontends/onnx/frontend/src/op/pad.cpp:32: Unsupported padding mode: "
                   "[wrap]", "")
    assert classify(wrap, converter.unsupported_messages) is Symptom.UNSUPPORTED
    divisor = Failure(Stage.NODE_CONVERSION, "openvino._pyopenvino.OpConversionFailure", "Check 'false' failed at "
                      "src/frontends/common_translators/src/unconverted_ops_report.cpp:151: Model wasn't fully "
                      "converted. Failed operations detailed log:\n-- aten::avg_pool3d with a message:\n[PyTorch "
                      "Frontend] Translation for aten::avg_pool2d do not support divisor_override input.", "")
    assert classify(divisor, converter.unsupported_messages) is Symptom.UNSUPPORTED
    other = Failure(Stage.NODE_CONVERSION, "openvino._pyopenvino.OpConversionFailure", "Check 'false' failed at "
                    "src/frontends/pytorch/src/op/cat.cpp: shapes do not match", "")
    assert classify(other, converter.unsupported_messages) is Symptom.CRASH


def test_the_component_is_the_frontend_the_plugin_or_torch() -> None:
    pytorch, onnx_route = CONVERTERS["openvino-pytorch"], CONVERTERS["openvino-onnx"]
    compiled = FaultSite(Stage.RUNTIME_LOAD, "Sin", options={"precision": "f32"})
    assert pytorch.component(compiled).key == onnx_route.component(compiled).key == PLUGIN_KEY
    assert pytorch.component(compiled).name == "CPU plugin: compiling a model that emits ONNX `Sin` (inference " \
                                               "precision f32)"
    converted = FaultSite(Stage.NODE_CONVERSION, "sin", options={"reader": "convert_model"})
    assert onnx_route.component(converted).name == "ONNX frontend (convert_model, with its offline " \
                                                   "transformations): the translation of `sin`"
    assert onnx_route.component(converted).key == "openvino-onnx"
    assert pytorch.component(FaultSite(Stage.NODE_CONVERSION, "sin")).project == "OpenVINO"

    exported = FaultSite(Stage.CAPTURE, "sin", options={"capture": "export"})
    assert pytorch.component(exported).name == "torch.export (capture and decompositions)"
    assert pytorch.component(FaultSite(Stage.CAPTURE, "sin")).name.startswith("torch.jit.trace")
    traced = FaultSite(Stage.NODE_CONVERSION, "sin", frame_owner="torch")
    assert pytorch.component(traced).name.startswith("torch.jit.trace")
    assert pytorch.tracker == onnx_route.tracker == "https://github.com/openvinotoolkit/openvino/issues"

def test_the_reference_evaluations_finding_is_evidence_in_the_blame_not_only_in_the_component() -> None:
    """A plugin blame read off OpenVINO's reference evaluation says so among its evidence lines too."""
    for converter in (CONVERTERS["openvino-pytorch"], CONVERTERS["openvino-onnx"]):
        (right,) = converter.label_evidence(("diverges-alone:1", "ov-reference:right"))
        assert right.endswith("computes the right outputs: the model is right and the CPU plugin computes it wrongly")
        (wrong,) = converter.label_evidence(("ov-reference:wrong",))
        assert wrong.endswith("gives wrong outputs too: the frontend's translation is wrong")
        assert converter.label_evidence(()) == ()
    assert all(c.label_evidence(("ov-reference:right",)) == () for n, c in CONVERTERS.items()
               if not n.startswith("openvino"))


def test_the_workarounds_are_the_other_settings_and_the_other_frontend() -> None:
    pytorch, onnx_route = CONVERTERS["openvino-pytorch"], CONVERTERS["openvino-onnx"]
    settings = pytorch.avoid_settings(OvPytorchOptions(precision="bf16"), Hints(divergence=True))
    assert [(s.converter, dict(s.options)) for s in settings][:2] == [
        ("openvino-pytorch", {"precision": "bf16", "performance": "LATENCY", "capture": "export",
                              "static_shapes": False}),
        ("openvino-pytorch", {"precision": "bf16", "performance": "LATENCY", "capture": "trace",
                              "static_shapes": True})]
    assert [s.options["precision"] for s in settings if s.converter == "openvino-pytorch"][2] == "f32"
    assert settings[-1].converter == "openvino-onnx" and onnx_route.options(settings[-1].options)
    last = onnx_route.avoid_settings(OvOnnxOptions(), Hints())
    assert [s.description for s in last] == ["the model read by convert_model",
                                             "the CPU plugin's THROUGHPUT performance hint",
                                             "OpenVINO's PyTorch frontend on the module itself"]
    assert pytorch.options(last[-1].options) == OvPytorchOptions()


@pytest.mark.parametrize("name,options", [
    ("openvino-pytorch", {}),
    ("openvino-pytorch", {"capture": "export", "static_shapes": True, "performance": "THROUGHPUT"}),
    ("openvino-onnx", {}),
    ("openvino-onnx", {"reader": "convert_model", "upstream": "onnx-native", "opset": 17}),
])
def test_a_real_conversion_of_a_small_graph_passes(name: str, options: dict[str, Any]) -> None:
    prepared = prepare(hand_graphs.elementwise(), 0, {}, 1.0)
    converter = CONVERTERS[name]
    result = check_prepared(prepared, converter, converter.options(options), FAST_CHECK)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    assert {"convert", "compile", "infer"} <= set(result.timings)


@pytest.mark.parametrize("name", NAMES)
def test_a_scalar_input_is_fed_as_a_scalar(name: str) -> None:
    g = GraphBuilder()
    x, y = g.input((4,)), g.input(())
    prepared = prepare(g.build((g.op("mul", (x, y), (4,)),)), 0, {}, 1.0)
    converter = CONVERTERS[name]
    verdict = check_prepared(prepared, converter, converter.options(), FAST_CHECK).verdict
    assert verdict.symptom is Symptom.PASS, verdict.message


def test_torchs_tracer_failing_inside_the_frontend_is_a_capture_failure() -> None:
    """The frontend traces the module with torch.jit.trace; where that fails (full_like of a bool with True: torch's
    'We don't have an op for aten::full_like' internal assert), the failure is torch's, at capture."""
    g = GraphBuilder()
    x = g.input((3, 1), DType.BOOL)
    graph = g.build((g.op("full_like", (x,), (3, 1), DType.BOOL, fill_value=True),))
    verdict = check_prepared(prepare(graph, 0, {}, 1.0), CONVERTERS["openvino-pytorch"], OvPytorchOptions(),
                             FAST_CHECK).verdict
    assert (verdict.symptom, verdict.stage) == (Symptom.CRASH, Stage.CAPTURE), verdict.message
    assert "Couldn't get TorchScript module by tracing" in verdict.message


def test_a_node_openvino_cannot_validate_makes_an_invalid_model_whichever_step_finds_it() -> None:
    """torch.gather takes an index smaller than its input on the other dims, OpenVINO's GatherElements does not:
    traced with dynamic shapes, the plugin's shape inference rejects the node at the first inference ("While
    validating node"). That is the model the frontend made, invalid: at validation, the frontend's."""
    graph = Graph.from_json({"schema_version": 1, "inputs": {"in0": {"shape": [3, 4, 4], "dtype": "int64"}},
                             "weights": {"w0": {"shape": [1, 1, 1], "dtype": "int64"}},
                             "nodes": [{"op": "gather", "inputs": ["in0", "w0"], "outputs": ["t0"],
                                        "attrs": {"dim": 2}}],
                             "outputs": ["t0"], "ranges": {"w0": [0, 3]},
                             "types": {"in0": {"shape": [3, 4, 4], "dtype": "int64"},
                                       "w0": {"shape": [1, 1, 1], "dtype": "int64"},
                                       "t0": {"shape": [1, 1, 1], "dtype": "int64"}}})
    converter = CONVERTERS["openvino-pytorch"]
    verdict = check_prepared(prepare(graph, 0, {}, 1.0), converter, OvPytorchOptions(), FAST_CHECK).verdict
    assert (verdict.symptom, verdict.stage) == (Symptom.INVALID_MODEL, Stage.VALIDATION), verdict.message
    assert "While validating node" in verdict.message
    assert converter.component(FaultSite(verdict.stage, "gather")).key == "openvino-pytorch"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype,value", [(DType.FLOAT64, 1e300), (DType.INT64, 2**40)])
def test_a_value_beyond_the_range_the_plugin_computes_in_is_not_judged(name: str, dtype: DType, value: float) -> None:
    """The plugin computes float64 in float32 and int64 in int32: a test holding 1e300 or 2**40 would read its
    infinity or wrapped integer as a wrong value; it is a limit instead."""
    g = GraphBuilder()
    x, y = g.input((3,), dtype), g.input((3,), dtype)
    graph = g.build((g.op("sub", (x, y), (3,), dtype),))
    prepared = prepare(graph, 0, {}, 1.0)
    big = torch.full((3,), value, dtype=torch.float64 if dtype is DType.FLOAT64 else torch.int64)
    source = dataclasses.replace(prepared.source, inputs=(big, big - 1), exports={})
    converter = CONVERTERS[name]
    with pytest.raises(StageError) as raised:
        converter.convert(source, converter.options({"upstream": "onnx-native"} if converter.role.starts_upstream
                                                    else {}))
    assert classify(raised.value.failure, converter.unsupported_messages) is Symptom.UNSUPPORTED
    assert "beyond its range: not judged" in raised.value.failure.message


def test_float64_is_judged_as_the_plugin_computes_it_in_float32() -> None:
    """The CPU plugin has no float64 kernels: a float64 matmul computed in float32 passes, labelled so."""
    g = GraphBuilder()
    a, b = g.input((3, 16), DType.FLOAT64), g.input((16, 5), DType.FLOAT64)
    graph = g.build((g.op("matmul", (g.op("sin", (a,), (3, 16), DType.FLOAT64), b), (3, 5), DType.FLOAT64),))
    result = check_prepared(prepare(graph, 0, {}, 1.0), CONVERTERS["openvino-pytorch"], OvPytorchOptions(),
                            FAST_CHECK)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    assert result.target is not None and result.target.computed_in == {"float64": "float32", "int64": "int32"}
    assert result.verdict.labels == ("computed-in:float64-as-float32",)


def test_under_a_bf16_hint_every_float_type_is_judged_as_computed_in_bfloat16() -> None:
    """The plugin narrows float64 to float32 and computes float16 as float32: under bf16, all three in bfloat16."""
    if "bf16" not in cpu_precisions():
        assert computed_in("bf16") == {"float64": "float32", "int64": "int32"}  # the plugin ignores the hint here
        return
    assert computed_in("bf16") == {"float64": "bfloat16", "float32": "bfloat16", "float16": "bfloat16",
                                   "int64": "int32"}
    assert computed_in("f32") == {"float64": "float32", "int64": "int32"}


def test_bfloat16_inputs_and_outputs_go_through_as_bfloat16() -> None:
    g = GraphBuilder()
    a = g.input((2, 3), DType.BFLOAT16)
    graph = g.build((g.op("add", (a, a), (2, 3), DType.BFLOAT16),))
    prepared = prepare(graph, 0, {}, 1.0)
    result = check_prepared(prepared, CONVERTERS["openvino-pytorch"], OvPytorchOptions(static_shapes=True),
                            FAST_CHECK)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    assert result.target is not None and result.target.output_dtypes == ("bfloat16",)


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_fault_is_a_wrong_value_on_sin(name: str) -> None:
    prepared = prepare(sin_mul(), 0, {}, 1.0)
    converter = REGISTRY[name]
    result = check_prepared(prepared, converter, converter.options({"upstream": "onnx-native"}
                                                                   if converter.role.starts_upstream else {}))
    verdict = result.verdict
    assert (verdict.symptom, verdict.diverging_op, verdict.stage) == (Symptom.WRONG_VALUES, "sin",
                                                                     Stage.GRAPH_OPTIMIZATION), verdict.message
    assert converter.component(FaultSite(verdict.stage, "sin")).project == "OpenVINO"


ENV = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}")


def run_alone(folder: Path, into: Path) -> subprocess.CompletedProcess:
    """The folder's repro.py, copied to an empty folder, run without this project on the path."""
    shutil.copytree(folder, into)
    boot = f"import sys, runpy; sys.path.append({sysconfig.get_paths()['purelib']!r}); " \
           "runpy.run_path('repro.py', run_name='__main__')"
    return subprocess.run([sys.executable, "-I", "-S", "-c", boot], cwd=into, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=300)


@pytest.mark.slow
def test_a_campaign_files_the_planted_faults_and_repro_runs_openvino_alone(tmp_path: Path) -> None:
    """The campaign files each planted route's case on sin; its repro.py, run alone, converts with the real frontend
    (the fault is planted in the test's converter only), so it finds no bug; it imports neither onnx nor ONNX Runtime
    where it starts from upstream.onnx, nor onnx for the PyTorch route."""
    out = tmp_path / "c"
    done = subprocess.run([sys.executable, "-m", "fuzzer", "fuzz", "--tests", "2", "--workers", "1", "--registry",
                           "test_openvino:REGISTRY", "--converters", ",".join(PLANTED), "--ops", "sin",
                           "--dtypes", "float32", "--nodes", "2", "--settings", "default", "--out", str(out),
                           "--no-reduce"], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env=ENV, cwd=ROOT)
    assert done.returncode == Exit.OK, done.stderr[-2000:]
    folders = {json.loads((f / "case.json").read_text())["converter"]: f for f in case_folders(out)}
    assert sorted(folders) == sorted(PLANTED)
    for name, folder in folders.items():
        case = json.loads((folder / "case.json").read_text())
        # Its operator is located within the follow-up budget on an idle machine; on a loaded one locating may stop.
        assert case["verdict"]["symptom"] == "wrong_values" and case["verdict"]["diverging_op"] in ("sin", None), \
            (name, case["verdict"])
        assert case["blame"]["component"]["project"] == "OpenVINO", case["blame"]
        script = (folder / "repro.py").read_text()
        assert "import openvino as ov" in script and "import onnx\n" not in script, name
        assert ("import onnxruntime" in script) is (name == "planted-openvino-onnx" and
                                                   not (folder / "upstream.onnx").exists()), name
        shown = run_alone(folder, tmp_path / f"alone-{name}")
        assert shown.returncode == Exit.OK, (name, shown.stdout[-1500:], shown.stderr[-1500:])
        assert "bug does not show" in shown.stdout, name


def test_the_other_exporters_cross_check_openvino_pytorch_and_it_checks_them() -> None:
    """openvino-pytorch has no opset: the other exporters check its cases at their default opsets, and it checks
    theirs with none (rather than both being skipped for an option the other does not take)."""
    prepared = prepare(sin_mul(), 0, {}, 1.0)
    planted = REGISTRY[PlantedPytorch.name]
    result = check_prepared(prepared, planted, planted.options(), FAST_CHECK)
    case = case_from_result(result, sin_mul(), 0, planted.name, collect_versions(()))
    options = {p.converter.name: dict(p.options) for p in plan(case, planted)}
    assert options["torch-onnx-dynamo"] == {"opset": 18} and options["torch-onnx-script"] == {"opset": 17}
    dynamo_case = dataclasses.replace(case, converter="torch-onnx-dynamo", converter_options={"opset": 20})
    assert {p.converter.name: dict(p.options) for p in plan(dynamo_case, CONVERTERS["torch-onnx-dynamo"])}[
        "openvino-pytorch"] == {}
