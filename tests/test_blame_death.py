"""Nothing found is lost to the diagnosis: a worker sends a bug's case before deciding whose bug it is (the other
tools that runs may kill it), then the diagnosed case over it; a death while deciding keeps the finding, its case
diagnosed from the evidence that needs no rerun. The fault is planted through the registry (test_first_sight)."""

from __future__ import annotations

from pathlib import Path

from test_first_sight import PLANTED_REGISTRY, CrashOnSin, sin_graph

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.case_writer import CaseWriter
from fuzzer.campaign.lost import lost_outcome
from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.messages import CaseSent, PhaseStarted, Step
from fuzzer.campaign.result import OWN_ERROR
from fuzzer.campaign.scheduler import Unit
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.case_head import read_case_head
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.support.faults import Fault
from oracles.verdict import Symptom

OPTIONS = {"upstream": "torch-onnx-script", "opset": 17}


def config(tmp_path: Path) -> WorkerConfig:
    return WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), converters=(CrashOnSin.name,))


def test_the_case_is_sent_before_its_diagnosis_and_the_diagnosed_case_replaces_it(tmp_path: Path) -> None:
    post = Collected()
    runner = UnitRunner(config(tmp_path), PLANTED_REGISTRY, post)
    graph = sin_graph()
    result = check_prepared(prepare(graph, 3, {}, 1.0), CrashOnSin(), OPTIONS)
    name = runner.file_case(0, 3, graph, CrashOnSin(), result, {})
    sent = [m for m in post.messages if isinstance(m, CaseSent | PhaseStarted)]
    assert [(type(m).__name__, getattr(m, "phase", None), getattr(m, "replace", None)) for m in sent] == [
        ("PhaseStarted", Step.CASE, None), ("CaseSent", None, False), ("PhaseStarted", Step.BLAME, None),
        ("CaseSent", None, True)]
    first, diagnosed = (m for m in sent if isinstance(m, CaseSent))
    assert first.body["case"].get("blame") is None and diagnosed.body["case"]["blame"]["component"]["project"] == (
        "onnxoptimizer")
    # The wire form keeps the flag, so a worker in another process replaces as this one does.
    assert CaseSent.from_json(diagnosed.to_json()).replace and not CaseSent.from_json(first.to_json()).replace
    writer = CaseWriter(tmp_path, PLANTED_REGISTRY, config(tmp_path))
    assert writer.write_sent(0, 3, first) == (name, None)
    assert read_case_head(tmp_path / name).blame is None
    assert writer.write_sent(0, 3, diagnosed) == (name, None)
    assert read_case_head(tmp_path / name).blame is not None


def test_a_death_while_deciding_keeps_the_finding_and_diagnoses_its_case_without_a_rerun(tmp_path: Path) -> None:
    post = Collected()
    runner = UnitRunner(config(tmp_path), PLANTED_REGISTRY, post)
    graph = sin_graph()
    result = check_prepared(prepare(graph, 3, {}, 1.0), CrashOnSin(), OPTIONS)
    runner.file_case(0, 3, graph, CrashOnSin(), result, {})
    first = next(m for m in post.messages if isinstance(m, CaseSent))
    writer = CaseWriter(tmp_path, PLANTED_REGISTRY, config(tmp_path))
    work = Assignment()
    work.begin(Unit(0, 3, [CrashOnSin.name]))
    work.started(PhaseStarted(0, CrashOnSin.name, Step.CASE))
    work.case_dir, _ = writer.write_sent(0, 3, first)  # as the campaign's loop does with the case message
    work.started(PhaseStarted(0, CrashOnSin.name, Step.BLAME))
    outcome = lost_outcome(work, Symptom.PROCESS_DEATH, "killed by SIGABRT", Fault("", ""), writer)
    assert [(e.converter, e.phase) for e in outcome.errors] == [(CrashOnSin.name, Step.BLAME.value)]
    (kept,) = outcome.results
    assert (kept.converter, kept.is_bug, kept.signature, kept.case_dir) == (
        CrashOnSin.name, True, result.verdict.signature, work.case_dir)
    head = read_case_head(tmp_path / work.case_dir)
    assert head.blame is not None and head.blame.component.project == "onnxoptimizer"


def test_a_death_while_deciding_without_a_written_case_is_our_own_error(tmp_path: Path) -> None:
    writer = CaseWriter(tmp_path, PLANTED_REGISTRY, config(tmp_path))
    work = Assignment()
    work.begin(Unit(0, 3, [CrashOnSin.name]))
    work.started(PhaseStarted(0, CrashOnSin.name, Step.BLAME))
    outcome = lost_outcome(work, Symptom.HANG, "no result after 60 s", Fault("", ""), writer)
    assert [r.symptom for r in outcome.results] == [OWN_ERROR]
