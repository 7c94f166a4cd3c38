"""Cross-checks (real exporters, ONNX Runtime and onnxslim): whose bug each case is, with the bug planted through a
converter of these tests (an exporter that writes Sin as Cos, an ONNX Runtime whose constant folding fails, an
onnxslim that fails), never left to an upstream bug staying unfixed; their JSON in case.json, old case.json without
them, and the report's Cross-checks section."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import onnx
import pytest
from test_whose_bug import SinAsCosExporter, one_op

from fuzzer.cases.case import CaseData, case_from_result, collect_versions
from fuzzer.cases.diagnosis import CrossCheck, Repair
from fuzzer.cases.diagnosis_report import render_diagnosis
from fuzzer.cases.folder import read_case, write_case
from fuzzer.cases.report import render_report
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS, Role
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import Shows
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.culprit import Culprit, FoundBy
from fuzzer.converters.onnx_slim import OnnxSlim
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.ort_levels import OPTIMIZING_LEVELS
from fuzzer.converters.ort_optimizer import ORT_OPTIMIZERS, OrtOptimizer, OrtOptimizerOptions
from fuzzer.diagnosis.crosscheck import cross_checks, outcome
from oracles.verdict import Stage, Symptom, Verdict

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
FLOOR_DIVIDE = CORPUS / "wrong_values-torch-onnx-script-node_conversion-floor_divide-int32-d79aa6c72e56-reduced"
SLIM_CRASH = CORPUS / "crash-onnxslim-graph_optimization-ValueError-01ab1eabbd25-reduced"
FOLDING = "ConstantFolding"


class CrashingSlim(OnnxSlim):
    """onnxslim that fails on every model holding a Sin: a tool crash on a model that was right before it."""

    name = "planted-onnxslim-crash"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(node.op_type == "Sin" for node in model.graph.node):
            raise ValueError("planted: cannot slim Sin")
        return super().transform(model, options)  # type: ignore[arg-type]


class FoldingCrash(OrtOptimizer):
    """ONNX Runtime whose constant folding fails on a graph holding a sin, at every level that folds (basic and up),
    unless ConstantFolding is disabled; `bisect` is its own bisection over the transformers, as ONNX Runtime's
    would find it."""

    name = "planted-ort-folding-crash"

    def convert_impl(self, source: Source, options: OrtOptimizerOptions) -> TargetRun:
        if self.crashes(source, options.level, options.disabled_optimizers):
            with Steps().at(Stage.GRAPH_OPTIMIZATION, "runtime_load"):
                raise RuntimeError("planted: ConstantFolding cannot fold Sin")
        return super().convert_impl(source, options)

    @staticmethod
    def crashes(source: Source, level: str, disabled: Sequence[str]) -> bool:
        return "sin" in source.graph.ops() and level in OPTIMIZING_LEVELS and FOLDING not in disabled

    def bisect(self, source: Source, options: OrtOptimizerOptions, run: TargetRun, shows: Shows) -> Culprit | None:
        levels = OPTIMIZING_LEVELS[: OPTIMIZING_LEVELS.index(options.level) + 1]
        level = next((lv for lv in levels if self.crashes(source, lv, ())), None)
        if level is None:
            return None
        named = next((name for name in ORT_OPTIMIZERS if not self.crashes(source, level, (name,))), "")
        return Culprit(self.name, FoundBy.BISECTION, named, level)


def planted_case(converter: Converter, options: dict | None = None) -> CaseData:
    """A one-sin graph checked under a converter planted with a fault, made a case (not yet diagnosed)."""
    graph = one_op("sin")
    result = check_prepared(prepare(graph, 3, {}, 1.0), converter, options)
    assert result.verdict.is_bug, result.verdict
    return case_from_result(result, graph, 3, converter.name, collect_versions(()))


def _outcomes(case: CaseData, converter: Converter | None = None) -> list[tuple[str, str, str]]:
    return [(c.name, c.outcome, c.culprit.sentence() if c.culprit else "") for c in cross_checks(case, converter)]


def test_a_model_the_exporter_wrote_wrong_is_the_exporters_own_bug() -> None:
    """Every other exporter (of either framework) converts the sin correctly; every ONNX Runtime level runs the
    planted exporter's model into the same wrong value, so the runtime's optimizer is not involved."""
    exporter = SinAsCosExporter()
    others = [(f"{c.name} (other exporter)", "passes", "") for c in CONVERTERS.of_role(Role.EXPORTER)]
    assert [name for name, _, _ in others[:3]] == ["torch-onnx-dynamo (other exporter)",
                                                   "torch-onnx-script (other exporter)", "tf2onnx (other exporter)"]
    assert _outcomes(planted_case(exporter, {"opset": 17}), exporter) == [
        *others,
        ("ONNX Runtime, optimizations disabled", "same bug", ""),
        ("ONNX Runtime, optimizations basic", "same bug", ""),
        ("ONNX Runtime, optimizations extended", "same bug", ""),
        ("ONNX Runtime, optimizations all", "same bug", ""),
    ]


def test_an_optimizer_crash_starts_at_basic_and_names_constant_folding_on_the_cases_own_level() -> None:
    crash = FoldingCrash()
    assert _outcomes(planted_case(crash, {"level": "all"}), crash) == [
        ("ONNX Runtime, optimizations disabled (upstream.onnx)", "passes", ""),
        ("ONNX Runtime, optimizations basic", "same bug", ""),
        ("ONNX Runtime, optimizations extended", "same bug", ""),
        ("ONNX Runtime, optimizations all", "same bug",
         "lowest level showing it: basic; disabling ConstantFolding alone removes it"),
    ]


def test_onnxslim_crash_on_a_model_that_was_right_before_it() -> None:
    slim = CrashingSlim()
    assert _outcomes(planted_case(slim), slim) == [("model before the tool (upstream.onnx)", "passes", "")]


def _verdict(symptom: Symptom, converter: str, op: str | None = None, dtype: str | None = None,
             signature: str = "", message: str = "") -> Verdict:
    return Verdict(symptom, Stage.NODE_CONVERSION, converter, signature=signature, message=message,
                   diverging_op=op, diverging_dtype=dtype)


def test_outcome_compares_signatures_or_the_divergence_across_converters() -> None:
    case = _verdict(Symptom.WRONG_VALUES, "torch-onnx-script", "floor_divide", "int32", signature="sig-a")
    assert outcome(case, _verdict(Symptom.WRONG_VALUES, "torch-onnx-script", "add", "int32", "sig-a")) == "same bug"
    other = _verdict(Symptom.WRONG_VALUES, "torch-onnx-dynamo", "floor_divide", "int32", "sig-b")
    assert outcome(case, other) == "same bug"
    assert outcome(case, dataclasses.replace(other, diverging_dtype="int64")) == \
        "other failure: wrong values on floor_divide (int64)"
    crash = _verdict(Symptom.CRASH, "torch-onnx-dynamo", signature="sig-c",
                     message="torch.onnx._internal.exporter._errors.ConversionError: no decomposition")
    assert outcome(case, crash) == "other failure: crash at node conversion (ConversionError)"
    assert outcome(case, _verdict(Symptom.PASS, "torch-onnx-dynamo")) == "passes"


def test_diagnosis_round_trips_through_the_case_folder(tmp_path: Path) -> None:
    checks = (CrossCheck("torch-onnx-dynamo (other exporter)", "passes", "torch-onnx-dynamo", {"opset": 18}),
              CrossCheck("onnxoptimizer pass nop alone", "same bug", "onnxoptimizer", {"passes": ["nop"]},
                         group="onnxoptimizer, each pass alone"),
              CrossCheck("ONNX Runtime, optimizations all", "same bug", "ort-optimizer", {"level": "all"},
                         culprit=Culprit("ort-optimizer", FoundBy.BISECTION, "ConstantFolding", "basic")))
    fix = Repair("rounding", "compute /Div (integer Div) in floating point and Floor it", "why", 1, b"not stored")
    case = dataclasses.replace(read_case(FLOOR_DIVIDE), cross_checks=checks, suggested_fix=fix)
    back = read_case(write_case(tmp_path, case))
    assert [c.to_json() for c in back.cross_checks] == [c.to_json() for c in checks]
    assert back.suggested_fix.to_json() == fix.to_json() and back.suggested_fix.model is None


def test_a_case_json_without_a_diagnosis_still_loads(tmp_path: Path) -> None:
    folder = write_case(tmp_path, dataclasses.replace(read_case(FLOOR_DIVIDE), cross_checks=None))
    data = json.loads((folder / "case.json").read_text())
    del data["cross_checks"], data["suggested_fix"]
    (folder / "case.json").write_text(json.dumps(data))
    case = read_case(folder)
    assert case.cross_checks is None and case.suggested_fix is None
    assert "## Cross-checks" not in render_report(case)


@pytest.mark.parametrize("planted", [SinAsCosExporter, FoldingCrash])
def test_report_names_each_cross_check_in_few_lines(planted: type[Converter]) -> None:
    converter = planted()
    case = planted_case(converter)
    case = dataclasses.replace(case, cross_checks=cross_checks(case, converter))
    report = render_report(case)
    section = report.split("## Cross-checks\n", 1)[1].split("\n## ", 1)[0]
    assert case.cross_checks
    for check in case.cross_checks:
        assert (check.group or check.name.rsplit(" ", 1)[0]) in section and check.outcome in section
    assert len(report.splitlines()) <= 80


def test_one_line_per_family_and_per_run_of_levels() -> None:
    def one(name: str, result: str, **extra: object) -> CrossCheck:
        return CrossCheck(name, result, **extra)  # type: ignore[arg-type]

    group = "onnxoptimizer, each pass alone"
    checks = (one("model before the tool (upstream.onnx)", "passes"),
              *(one(f"onnxoptimizer pass {p} alone", "same bug" if p in ("b", "d") else "passes",
                    options={"passes": [p]}, group=group) for p in "abcde"),
              one("onnxoptimizer pass f alone", "other failure: crash at graph optimization (ValueError)",
                  options={"passes": ["f"]}, group=group))
    case = dataclasses.replace(read_case(SLIM_CRASH), converter="onnxoptimizer", cross_checks=checks)
    assert render_diagnosis(case, "onnxoptimizer").splitlines()[2:5] == [
        "- model before the tool (upstream.onnx): passes",
        "- onnxoptimizer, each pass alone (6): same bug with `b`, `d`; other failure: crash at graph optimization "
        "(ValueError) with `f`; passes with the other 3",
        "",
    ]
    levels = tuple(one(f"ONNX Runtime, optimizations {lv}", "same bug") for lv in ("disabled", "basic", "all"))
    case = dataclasses.replace(read_case(FLOOR_DIVIDE), cross_checks=levels)
    assert "- ONNX Runtime, optimizations disabled, basic, all: same bug\n" in render_diagnosis(case, "x")
