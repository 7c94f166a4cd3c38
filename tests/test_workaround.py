"""A tested workaround in every diagnosed case: the cheapest setting of its converter under which the reduced case's
outputs agree, found exactly and re-run here; a case no setting helps says so. Bugs are planted through converters
of these tests (test_whose_bug's), never borrowed from an upstream release."""

from __future__ import annotations

import dataclasses

import onnx
import pytest
from test_whose_bug import KernelFaultScript, PlantedOptimizer, SinAsCosExporter, diagnosed, one_op, sin_as_cos

from fuzzer.cases.case import CaseData
from fuzzer.cases.remedy import Workaround
from fuzzer.cases.replay import case_expected
from fuzzer.cases.report import render_report
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import Expected
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import AvoidsBugs
from fuzzer.converters.culprit import Culprit, FoundBy
from fuzzer.converters.onnx_slim import OnnxSlim
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.ort_levels import LEVELS
from fuzzer.converters.setting import Hints
from fuzzer.diagnosis.blame import KERNEL_KEY
from fuzzer.diagnosis.workaround import find_workaround, runner
from generators.generator import GenOptions, generate
from oracles.verdict import Symptom


class PlantedSlim(OnnxSlim):
    """onnxslim that computes every Sin as Cos whatever its flags: no setting of it avoids the bug."""

    name = "planted-onnxslim"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        return sin_as_cos(model)


def rerun(case: CaseData, found: Workaround, converter: Converter) -> Symptom:
    """The stated workaround run once more here, on the case's own inputs, by the converter it names."""
    prepared = case_expected(case)
    assert isinstance(prepared, Expected)
    rerunner = runner(found.converter, found.level, converter)
    assert rerunner is not None
    return check_prepared(prepared, rerunner, found.options).verdict.symptom


@pytest.mark.slow
def test_the_other_exporter_avoids_a_bug_of_one_exporter() -> None:
    exporter = SinAsCosExporter()
    case = diagnosed(one_op("sin"), exporter, {"opset": 17})
    assert case.workaround == Workaround(
        ("constant folding off: same bug", "the other exporter, torch-onnx-dynamo (dynamo=True): passes, re-tested"),
        "the other exporter, torch-onnx-dynamo (dynamo=True)", "torch-onnx-dynamo", {"opset": 18},
        'torch.onnx.export(module, inputs, "model.onnx", dynamo=True, opset_version=18)')
    assert rerun(case, case.workaround, exporter) is Symptom.PASS
    assert "dynamo=True, opset_version=18)\n```" in render_report(case)


def test_the_pass_set_without_the_guilty_pass_avoids_its_bug() -> None:
    optimizer = PlantedOptimizer()
    case = diagnosed(one_op("sin"), optimizer)
    kept = ["eliminate_identity", "eliminate_nop_transpose"]
    assert case.workaround == Workaround(
        ("onnxoptimizer's passes without planted_fuse_sin: passes, re-tested",),
        "onnxoptimizer's passes without planted_fuse_sin", "planted-onnxoptimizer",
        {"upstream": "torch-onnx-script", "opset": 17, "passes": kept, "fixed_point": False},
        "model = onnxoptimizer.optimize(model, [p for p in onnxoptimizer.get_fuse_and_elimination_passes() if p "
        "not in ['planted_fuse_sin']], fixed_point=False)")
    assert rerun(case, case.workaround, optimizer) is Symptom.PASS


def test_a_case_no_setting_helps_says_so() -> None:
    case = diagnosed(one_op("sin"), PlantedSlim())
    assert case.workaround == Workaround(("onnxslim's constant folding off: same bug",))
    assert "None of the settings convsmith tried makes the outputs agree (tried: onnxslim's constant folding off: " \
           "same bug)." in render_report(case)


def test_a_case_that_killed_its_process_is_not_run_here() -> None:
    case = diagnosed(one_op("sin"), PlantedSlim())
    lost = dataclasses.replace(case, verdict=dataclasses.replace(case.verdict, symptom=Symptom.PROCESS_DEATH))
    assert find_workaround(lost, PlantedSlim()) == Workaround(
        ("onnxslim's constant folding off: skipped: the case's process death would take this process with it",))


def test_ort_optimizer_leaves_out_the_transformers_its_options_disable() -> None:
    graph = generate(1, GenOptions(nodes=1, include_ops=("pattern_conv_activation",), dtypes=("float32",)))
    prepared = prepare(graph, 1, {}, 1.0)
    fired = [check_prepared(prepared, CONVERTERS["ort-optimizer"], {"level": "all", "disabled_optimizers": off})
             for off in ([], ["ConvActivationFusion"])]
    assert [r.verdict.symptom for r in fired] == [Symptom.PASS, Symptom.PASS]
    assert [r.target is not None and "ConvActivationFusion" in r.target.rewrites for r in fired] == [True, False]


CULPRITS = (Culprit("onnxoptimizer", FoundBy.ALONE, "eliminate_identity"),
            Culprit("onnxoptimizer", FoundBy.ALONE, "fuse_bn_into_conv"),
            Culprit("ort-optimizer", FoundBy.BISECTION, "ConstantFolding", "basic"))
HINTS = (Hints(), Hints(True, CULPRITS, True, 22))


@pytest.mark.parametrize("name", list(CONVERTERS))
def test_every_converters_settings_parse_and_change_something(name: str) -> None:
    converter = CONVERTERS[name]
    if not converter.availability()[0]:
        pytest.skip(f"{name} does not import here")
    if not isinstance(converter, AvoidsBugs):
        pytest.skip(f"{name} lists no settings that avoid a bug")
    for seed in range(6):
        options = converter.options_type.draw(seed)
        for hints in HINTS:
            settings = converter.avoid_settings(options, hints)
            assert len({s.description for s in settings}) == len(settings)
            for setting in settings:
                assert setting.description and "\n" not in setting.description + setting.code
                assert setting.level in ("", *LEVELS)
                parsed = CONVERTERS[setting.converter].options(setting.options)
                assert parsed != options or setting.level, (name, setting)



def test_a_runtime_kernel_fault_is_avoided_at_another_level_first() -> None:
    """The planted kernel computes Sin as Cos in the exporter's own run only: ONNX Runtime at another level (where a
    fusion would replace a wrong kernel) runs the right model rightly. Blamed on the kernel, levels go first."""
    exporter = KernelFaultScript()
    case = diagnosed(one_op("sin"), exporter, {"opset": 17})
    assert case.blame is not None and case.blame.component.key == KERNEL_KEY
    setting = "ONNX Runtime's optimizations at level basic for the exported model"
    assert case.workaround == Workaround(
        (f"{setting}: passes, re-tested",), setting, "planted-kernel-script",
        {"opset": 17, "constant_folding": True, "script_module": False, "dynamic": False},
        "sess_options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC", "basic")
    assert rerun(case, case.workaround, exporter) is Symptom.PASS
