"""A converter bug that kills its process still reduces: the reducer checks candidates in a confined child.

`FaultySegfaultOnSin` is a real registry entry (loaded by reference in the child, as campaign workers load theirs)
that raises SIGSEGV during node conversion whenever the graph holds a `sin` node and otherwise returns the eager
outputs, a converter fault planted for the test, not a mock of a library.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import Campaign
from fuzzer.cases.folder import read_case
from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.role import Role
from fuzzer.reduce.case import reduce_case
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker, Job
from fuzzer.support.tensors import to_oracle_array
from generators.generator import GenOptions, generate
from generators.ir import Graph
from oracles.verdict import Stage, Symptom


def six_nodes_with_a_sin() -> tuple[int, Graph]:
    """The first seed from 13 whose six-node graph holds a sin after its first node (a prefix without it to check),
    and its graph: found, not pinned, so that a change in what a seed draws does not break the test."""
    for seed in range(13, 213):
        graph = generate(seed, GenOptions(nodes=6))
        if len(graph.nodes) == 6 and "sin" in graph.ops()[1:]:
            return seed, graph
    raise AssertionError("no six-node graph with a sin in 200 seeds")


class FaultySegfaultOnSin(Converter):
    name = "faulty-segfault-on-sin"
    libraries = ()
    distributions = ()
    options_type = ConverterOptions

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        with Steps().at(Stage.NODE_CONVERSION, "convert"):
            if any(node.op == "sin" for node in source.graph.nodes):
                os.kill(os.getpid(), signal.SIGSEGV)
        pairs = [to_oracle_array(x) for x in source.module(*source.inputs)]
        return TargetRun(tuple(a for a, _ in pairs), tuple(d for _, d in pairs), {"convert": 0.0})


class FaultyCorruptsAfterCos(Converter):
    """Converts a graph holding `cos` and leaves its process damaged (a flag standing in for a heap it corrupted):
    the next conversion in that process dies by SIGSEGV, whatever its graph."""

    name = "faulty-corrupts-after-cos"
    libraries = ()
    distributions = ()
    options_type = ConverterOptions
    damaged = False  # per process: the child's own copy of the class

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        with Steps().at(Stage.NODE_CONVERSION, "convert"):
            if FaultyCorruptsAfterCos.damaged:
                os.kill(os.getpid(), signal.SIGSEGV)
            FaultyCorruptsAfterCos.damaged = any(node.op == "cos" for node in source.graph.nodes)
        pairs = [to_oracle_array(x) for x in source.module(*source.inputs)]
        return TargetRun(tuple(a for a, _ in pairs), tuple(d for _, d in pairs), {"convert": 0.0})


SEGFAULT_REGISTRY = ConverterRegistry([FaultySegfaultOnSin(), FaultyCorruptsAfterCos()])
CONFIG = CheckerConfig(registry="test_reduce_isolated:SEGFAULT_REGISTRY", timeout_s=30.0, memory_mb=2048)


@pytest.mark.slow
def test_a_case_whose_conversion_kills_the_process_is_reduced_to_the_faulty_operator(tmp_path: Path) -> None:
    seed, graph = six_nodes_with_a_sin()
    with IsolatedChecker(CONFIG) as checker:
        found, verdict = checker.write_case(Job(graph, seed, FaultySegfaultOnSin.name, {}), tmp_path, "found",
                                            None, None)
        # Its stage is read from frames in fuzzer/converters/ only: a converter defined here is "stage-unknown".
        assert verdict.symptom is Symptom.PROCESS_DEATH and verdict.labels == ("stage-unknown",)
        assert "killed by SIGSEGV" in verdict.message
        case = read_case(found)
        reduction = reduce_case(case, tmp_path, checker, budget_s=120.0)
        assert checker.deaths >= 2  # the found case's own death, and at least the accepted candidates'
    reduced = read_case(reduction.path)
    assert [n.op for n in reduced.graph.nodes] == ["sin"]
    assert reduced.signature == case.signature
    assert reduced.verdict.symptom is Symptom.PROCESS_DEATH
    assert reduced.original == "found" and reduced.reduction["nodes_before"] == 6
    assert "faulthandler" in (reduction.path / "log.txt").read_text()


def test_a_check_that_passes_in_the_child_gives_its_verdict_and_keeps_the_child(tmp_path: Path) -> None:
    seed, graph = six_nodes_with_a_sin()
    without_sin = graph.nodes[0].op
    assert without_sin != "sin"
    from generators.edit import prefix

    with IsolatedChecker(CONFIG) as checker:
        verdict = checker.verdict(Job(prefix(graph, 1), seed, FaultySegfaultOnSin.name, {}))
        pid = checker.proc.pid
        again = checker.verdict(Job(prefix(graph, 1), seed, FaultySegfaultOnSin.name, {}))
        assert checker.proc.pid == pid and checker.deaths == 0
    assert verdict.symptom is Symptom.PASS and again.symptom is Symptom.PASS


def run_campaign(out: Path, converter: str, ops: tuple[str, ...], nodes: int, seed: int, tests: int,
                 reduce_budget_s: float) -> tuple[Campaign, CampaignDB]:
    """A one-worker campaign of `tests` graphs of `ops` through a planted `converter`, run to its end: (the Campaign,
    its database)."""
    from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
    from fuzzer.campaign.worker_config import WorkerConfig

    worker = WorkerConfig(out_dir=str(out), log_dir=str(out / LOG_DIR), registry=CONFIG.registry, min_nodes=nodes,
                          nodes=nodes, include_ops=ops, timeout_s=30.0, memory_mb=2048, check={"input_budget_s": 0.2})
    spec = CampaignSpec(seed, (converter,), worker, tests)
    out.mkdir(parents=True)
    db = CampaignDB(out / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    campaign = Campaign(out, spec, db, workers=1, reduce_budget_s=reduce_budget_s)
    assert campaign.run() == "finished"
    return campaign, db


@pytest.mark.slow
def test_a_campaign_ends_with_its_process_killing_cases_reduced(tmp_path: Path) -> None:
    from fuzzer.campaign.spec import case_folders

    out = tmp_path / "c"
    campaign, _ = run_campaign(out, FaultySegfaultOnSin.name, ("sin", "cos", "exp", "abs"), 4, 7, 4, 60.0)
    folders = case_folders(out)
    assert folders and campaign.reducer is not None and campaign.reducer.reduced == len(folders)
    for folder in folders:
        (reduced,) = [p for p in folder.iterdir() if p.name.endswith("-reduced")]
        assert [n.op for n in read_case(reduced).graph.nodes] == ["sin"]


@pytest.mark.slow
def test_converter_options_the_bug_does_not_need_are_set_back_to_their_defaults(tmp_path: Path) -> None:
    """A bug planted in the TorchScript exporter (every Sin exported as Cos) shows at opset 15 without constant
    folding as at the defaults, and on the nn.Module export as on the ScriptModule one; reduced, it is filed with the
    exporter's defaults, the settings a maintainer would try first."""
    from test_whose_bug import SinAsCosExporter, one_op

    from fuzzer.cases.case import case_from_result, collect_versions
    from fuzzer.check.pipeline import check_prepared
    from fuzzer.check.source import prepare
    from fuzzer.converters import CONVERTERS

    graph, options = one_op("sin"), {"opset": 15, "constant_folding": False, "script_module": True}
    result = check_prepared(prepare(graph, 0, {}, 1.0), SinAsCosExporter(), options)
    assert result.verdict.symptom is Symptom.WRONG_VALUES, result.verdict
    case = case_from_result(result, graph, 0, SinAsCosExporter.name, collect_versions(()), case_id_="found")
    with IsolatedChecker(CheckerConfig(registry="test_reduce_isolated:PLANTED_EXPORTER")) as checker:
        reduction = reduce_case(case, tmp_path, checker, budget_s=30.0)
    reduced = read_case(reduction.path)
    assert dict(reduced.converter_options) == CONVERTERS["torch-onnx-script"].options(None).to_json()
    assert reduced.reduction["options_set_to_default"] == ["opset", "constant_folding", "script_module"]
    assert reduced.signature == case.signature


def _planted_exporter() -> ConverterRegistry:
    """The registry the child loads: imported there, not at this module's import (test_whose_bug is large)."""
    from test_whose_bug import SinAsCosExporter

    return ConverterRegistry([SinAsCosExporter()])


PLANTED_EXPORTER = _planted_exporter


@pytest.mark.slow
def test_a_shape_first_reduction_keeps_dims_and_options_and_its_polish_replaces_it_in_place(tmp_path: Path) -> None:
    """`shape_only` takes nodes away and nothing else; reducing its reduced case again polishes it where it lies
    (dims and options down), keeping the size it was found at and the first step's record."""
    from test_whose_bug import SinAsCosExporter, one_op

    from fuzzer.cases.case import case_from_result, collect_versions
    from fuzzer.check.pipeline import check_prepared
    from fuzzer.check.source import prepare

    graph, options = one_op("sin"), {"opset": 15, "constant_folding": False, "script_module": True}
    result = check_prepared(prepare(graph, 0, {}, 1.0), SinAsCosExporter(), options)
    case = case_from_result(result, graph, 0, SinAsCosExporter.name, collect_versions(()), case_id_="found")
    with IsolatedChecker(CheckerConfig(registry="test_reduce_isolated:PLANTED_EXPORTER")) as checker:
        shaped = reduce_case(case, tmp_path, checker, budget_s=30.0, shape_only=True)
        first = read_case(shaped.path)
        assert first.reduction is not None and first.reduction["polished"] is False
        assert dict(first.converter_options) == dict(case.converter_options) and first.graph.types == graph.types
        # Whose bug it is from the checks that decide it only; the rest (a fix, a workaround) once polished.
        assert first.blame is not None and first.blame.settled and first.workaround is None
        assert {c.name for c in first.cross_checks or ()} == {
            f"{c.name} (other exporter)" for c in CONVERTERS.of_role(Role.EXPORTER) if c.name != SinAsCosExporter.name}
        assert "run as the case was first filed" in (shaped.path / "report.md").read_text()
        assert [s.name for s in shaped.result.stats] == ["remove_dead", "drop_outputs", "cut_nodes", "bypass_nodes"]
        polished = reduce_case(first, tmp_path, checker, budget_s=30.0, original=first.original)
    assert polished.path == shaped.path and sorted(p.name for p in tmp_path.iterdir()) == [shaped.path.name]
    second = read_case(polished.path)
    assert second.reduction["polished"] is True and second.original == "found"
    assert second.workaround is not None and "first filed" not in (polished.path / "report.md").read_text()
    assert second.reduction["options_set_to_default"] == ["opset", "constant_folding", "script_module"]
    assert second.reduction["nodes_before"] == first.reduction["nodes_before"]
    assert second.reduction["earlier"]["polished"] is False and "earlier" not in second.reduction["earlier"]
    assert all(t.shape in ((), (1,)) for t in second.graph.inputs.values())
    assert second.signature == case.signature


@pytest.mark.slow
def test_a_candidate_that_dies_in_a_child_an_earlier_check_damaged_is_judged_again_in_a_fresh_one() -> None:
    from generators.builder import GraphBuilder
    from generators.dtypes import DType

    def one(op: str) -> Graph:
        b = GraphBuilder()
        return b.build((b.op(op, (b.input((2, 3), DType.FLOAT32),), (2, 3), DType.FLOAT32),))

    name = FaultyCorruptsAfterCos.name
    with IsolatedChecker(CONFIG) as checker:
        assert checker.verdict(Job(one("cos"), 0, name, {})).symptom is Symptom.PASS
        # Its first run dies of what the cos left behind; run again in a fresh child, it passes.
        assert checker.verdict(Job(one("exp"), 0, name, {})).symptom is Symptom.PASS
        assert checker.deaths == 1 and checker.answered == 1
    with IsolatedChecker(CONFIG) as checker:  # a death in a fresh child is the candidate's own: judged once
        died = checker.verdict(Job(one("sin"), 0, FaultySegfaultOnSin.name, {}))
        assert died.symptom is Symptom.PROCESS_DEATH and checker.deaths == 1


@pytest.mark.slow
def test_a_worker_death_its_own_graph_does_not_show_alone_is_marked_not_reproduced_and_counted_apart(
        tmp_path: Path) -> None:
    """The worker dies in the test after a graph with a cos; checked alone, the dead test's graph converts: its case
    is kept, marked, and neither reduced nor left unreduced in the triage."""
    from fuzzer.campaign.spec import case_folders
    from fuzzer.cases.case_json import UNREPRODUCED_NOTE
    from fuzzer.triage.model import NOT_REPRODUCED
    from fuzzer.triage.view import triage

    out = tmp_path / "c"
    campaign, db = run_campaign(out, FaultyCorruptsAfterCos.name, ("cos", "exp"), 2, 3, 3, 20.0)
    folders = case_folders(out)
    assert folders and campaign.reducer is not None
    assert (campaign.reducer.unreproduced, campaign.reducer.failed, campaign.reducer.reduced) == (
        len(folders), len(folders), 0)
    for folder in folders:
        note = (folder / UNREPRODUCED_NOTE).read_text()
        assert "checked alone, the case's own graph gives pass" in note, note
        assert not any(p.name.endswith("-reduced") for p in folder.iterdir())
    assert f"{len(folders)} of them do not show their bug alone: {UNREPRODUCED_NOTE}" in campaign.reducer.summary()
    view = triage(out, db)
    assert view.headline.unreproduced_cases == len(folders) and view.headline.unreduced_cases == 0
    assert {g.representative.reduction_state for g in view.groups} == {NOT_REPRODUCED}
