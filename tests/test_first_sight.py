"""Diagnosis at first sighting: a case names its owner as it is filed, before any reduction polishes it, and a
tool's failure is the exporter's only where the evidence shows the model it received was already wrong. Faults are
planted through the registry (converters of these tests), never left to an upstream bug staying unfixed."""

from __future__ import annotations

import dataclasses

import onnx
import pytest

from fuzzer.cases.case import CaseData, case_from_result, case_log, collect_versions
from fuzzer.cases.case_head import read_case_head
from fuzzer.cases.diagnosis import BEFORE_TOOL, OTHER_FAILURE, PASSES, SAME_BUG, CrossCheck
from fuzzer.cases.folder import write_case
from fuzzer.cases.report import owner_operator_words, render_report, title
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.onnx_optimizer import OnnxOptimizer
from fuzzer.converters.options import ConverterOptions
from fuzzer.diagnosis.blame import blame_case
from fuzzer.diagnosis.whose_bug import with_blame
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph


class CrashOnSin(OnnxOptimizer):
    """onnxoptimizer whose run raises on any model with a Sin node (a valid model: the tool's own crash)."""

    name = "planted-sin-crash"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(node.op_type == "Sin" for node in model.graph.node):
            raise KeyError("planted: no rule for Sin")
        return model


PLANTED_REGISTRY = ConverterRegistry([CrashOnSin()])


def sin_graph() -> Graph:
    b = GraphBuilder()
    x = b.input((3, 5), DType.FLOAT32)
    return b.build((b.op("sin", (x,), (3, 5), DType.FLOAT32),))


def first_sighted(graph: Graph) -> CaseData:
    """The planted tool's case as a worker files it: checked, made a case, blamed from the deciding checks."""
    converter = CrashOnSin()
    prepared = prepare(graph, 3, {}, 1.0)
    result = check_prepared(prepared, converter, {"upstream": "torch-onnx-script", "opset": 17})
    assert result.verdict.is_bug, result.verdict
    case = case_from_result(result, graph, 3, converter.name, collect_versions(()), log=case_log(result))
    return with_blame(case, converter, result.expected, own_framework=True)


def test_a_case_names_its_owner_as_it_is_first_filed(tmp_path) -> None:
    case = first_sighted(sin_graph())
    assert case.blame is not None and case.blame.settled
    assert case.blame.component.project == "onnxoptimizer"
    assert [(c.name, c.outcome) for c in case.cross_checks or ()] == [(BEFORE_TOOL, "passes")]
    report = render_report(case)
    assert "File it with **onnxoptimizer**" in report and "Not diagnosed yet" not in report
    assert "run as the case was first filed" in report
    assert read_case_head(write_case(tmp_path, case)).owner == CrashOnSin.name
    # Titled in the tool's vocabulary: the ONNX operator the one graph operator became in the model it received.
    assert title(case) == ("planted-sin-crash: KeyError at graph optimization on `Sin` (from `sin`): "
                           "'planted: no rule for Sin'")


def test_an_unreduced_case_is_titled_by_the_onnx_operators_its_localized_operator_is_written_with() -> None:
    """Beside another operator, `sin` is named by its ONNX counterpart's `Sin`, which the received model holds."""
    b = GraphBuilder()
    x = b.input((3, 5), DType.FLOAT32)
    graph = b.build((b.op("sin", (b.op("neg", (x,), (3, 5), DType.FLOAT32),), (3, 5), DType.FLOAT32),))
    case = first_sighted(graph)
    assert owner_operator_words(case, "sin") == "`Sin` (from `sin`)"
    assert owner_operator_words(case, "neg") == "`Neg` (from `neg`)"


def test_a_tool_crash_on_a_valid_model_stays_the_tools_though_the_exporter_failed_otherwise() -> None:
    """The exporter's own test of the graph failed otherwise (its known bug): the tool received a valid model."""
    case = first_sighted(sin_graph())
    other = CrossCheck(BEFORE_TOOL, OTHER_FAILURE + "wrong dtype on amin (float16)", "torch-onnx-script")
    blame = blame_case(dataclasses.replace(case, cross_checks=(other,)), None, CrashOnSin())
    assert blame.component.key == CrashOnSin.name
    assert any("not the failure filed here" in line for line in blame.evidence)


def test_a_tool_crash_on_a_model_the_checker_rejects_is_the_exporters() -> None:
    case = first_sighted(sin_graph())
    broken = onnx.load_from_string(case.upstream_model)
    broken.graph.node[0].input[0] = "nowhere"  # a node reading a value no one defines: ONNX's checker rejects it
    other = CrossCheck(BEFORE_TOOL, OTHER_FAILURE + "invalid model at validation", "torch-onnx-script")
    case = dataclasses.replace(case, cross_checks=(other,), upstream_model=broken.SerializeToString())
    blame = blame_case(case, None, CrashOnSin())
    assert (blame.component.key, blame.settled) == ("torch-onnx-script", True)
    assert any("ONNX's checker rejects the model" in line for line in blame.evidence)


@pytest.mark.slow
def test_every_case_of_a_short_campaign_has_a_blame(tmp_path) -> None:
    """Originals and the reducer's quick (unpolished) cases alike."""
    from fuzzer.campaign.db import DB_NAME, CampaignDB
    from fuzzer.campaign.loop import Campaign
    from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
    from fuzzer.campaign.worker_config import WorkerConfig

    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR),
                          registry="test_first_sight:PLANTED_REGISTRY", min_nodes=1, nodes=3,
                          include_ops=("sin", "neg", "abs"), dtypes=("float32",),
                          check={"input_budget_s": 0.2}, converters=(CrashOnSin.name,))
    spec = CampaignSpec(7, (CrashOnSin.name,), worker, 4)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1, reduce_budget_s=10.0).run() == "finished"
    heads = [read_case_head(p.parent) for p in sorted(tmp_path.glob("**/case.json"))]
    assert heads and all(h.blame is not None and h.blame.component.project == "onnxoptimizer" for h in heads)


class RefusesSin(OnnxOptimizer):
    """onnxoptimizer that refuses any model with a Sin node, in words it documents as its limit."""

    name = "planted-sin-refusal"
    unsupported_messages = (r"planted: Sin is not supported",)

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(node.op_type == "Sin" for node in model.graph.node):
            raise NotImplementedError("planted: Sin is not supported by this tool")
        return model


REFUSING_REGISTRY = ConverterRegistry([RefusesSin()])


@pytest.mark.slow
def test_a_clean_refusal_lands_in_limits_not_in_root_causes(tmp_path) -> None:
    from fuzzer.campaign.db import DB_NAME, CampaignDB
    from fuzzer.campaign.loop import Campaign
    from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
    from fuzzer.campaign.worker_config import WorkerConfig
    from fuzzer.triage.limits import Limit, limits
    from fuzzer.triage.view import triage

    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR),
                          registry="test_first_sight:REFUSING_REGISTRY", min_nodes=1, nodes=1,
                          include_ops=("sin",), dtypes=("float32",),
                          check={"input_budget_s": 0.2}, converters=(RefusesSin.name,))
    spec = CampaignSpec(7, (RefusesSin.name,), worker, 3)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1, reduce_budget_s=5.0).run() == "finished"
    assert limits(db) == [Limit(RefusesSin.name, "NotImplementedError: planted: Sin is not supported by this tool", 3)]
    assert triage(tmp_path, db, None).groups == ()
    db.close()


def _exporter_divergence(converter_name: str, other: str, outcome: str) -> CaseData:
    """A wrong-values case of `converter_name` on a relu graph whose other-exporter check of `other` says `outcome`."""
    from fuzzer.cases.diagnosis import OTHER_EXPORTER
    from fuzzer.converters import CONVERTERS
    from oracles.verdict import Stage, Symptom, Verdict

    b = GraphBuilder()
    x = b.input((3, 5), DType.FLOAT32)
    graph = b.build((b.op("relu", (x,), (3, 5), DType.FLOAT32),))
    result = check_prepared(prepare(graph, 3, {}, 1.0), CONVERTERS[converter_name], {"opset": 18})
    wrong = Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, converter_name, signature=f"wrong-{converter_name}",
                    diverging_op="relu")
    case = case_from_result(dataclasses.replace(result, verdict=wrong), graph, 3, converter_name,
                            collect_versions(()), log=case_log(result))
    return dataclasses.replace(case, cross_checks=(CrossCheck(OTHER_EXPORTER.format(other), outcome, other),))


def test_one_wrong_result_of_both_exporters_of_a_project_is_one_shared_root_cause() -> None:
    from fuzzer.diagnosis.evidence import ModelEvidence, Opinion

    unsettled = ModelEvidence("", "", False, Opinion.DIFFERS, "", ("Relu",))
    pairs = (("torch-onnx-script", "torch-onnx-dynamo"), ("torch-onnx-dynamo", "torch-onnx-script"))
    blames = [blame_case(_exporter_divergence(own, other, SAME_BUG), unsettled) for own, other in pairs]
    assert blames[0].component == blames[1].component
    assert blames[0].shared and not blames[0].settled
    assert blames[0].component.key == "torch-onnx-dynamo+torch-onnx-script"
    assert blames[0].component.project == "PyTorch"
    # Where the other exporter passes, each keeps its own.
    alone = blame_case(_exporter_divergence("torch-onnx-script", "torch-onnx-dynamo", PASSES), unsettled)
    assert alone.component.key == "torch-onnx-script" and not alone.shared
