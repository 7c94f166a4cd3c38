"""A lost worker (dead, hung or out of memory) becomes verdicts for what it was running: the converter's test when
it was in a converter, our own error when it was making a case, the case it had sent when it was deciding whose bug
that is, the source's failure when it was generating."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.case_writer import CaseWriter
from fuzzer.campaign.messages import OwnError, Step
from fuzzer.campaign.policy.settings import settled_options
from fuzzer.campaign.result import TestResult
from fuzzer.support.faults import Fault, lost_verdict
from generators.ir import Graph
from oracles.signature import crash_signature
from oracles.verdict import Stage, Symptom, Verdict

LOST_TIMER = "converter_until_lost"  # a dead or hung worker's test: booked as conversion time


@dataclass
class LostOutcome:
    """What to record of a lost worker's unit: our own errors first, then the tests' results."""

    errors: list[OwnError] = field(default_factory=list)
    results: list[TestResult] = field(default_factory=list)


def lost_outcome(work: Assignment, symptom: Symptom, reason: str, fault: Fault, cases: CaseWriter) -> LostOutcome:
    """The errors and results of the unit `work` was running when its worker was lost (none when it was idle)."""
    unit, name, outcome = work.unit, work.converter, LostOutcome()
    if unit is None:
        return outcome
    if work.phase is Step.BLAME and name is not None and name in unit.remaining:
        return _lost_deciding(work, name, symptom, reason, fault, cases)
    if work.phase in (Step.CONVERT, Step.CASE) and name is not None and name in unit.remaining:
        if work.phase is Step.CASE:  # our own case writer died: not the converter's
            outcome.errors.append(OwnError(unit.idx, unit.seed, name, Step.CASE.value, symptom.json_name, reason,
                                           fault.dump))
            outcome.results.append(TestResult.own_error(unit.idx, unit.seed, name))
        else:
            outcome.results.append(_lost_test(work, name, symptom, reason, fault, cases, outcome.errors))
        return outcome
    # Generation, materialization or the eager source: never a converter's bug.
    outcome.errors.append(OwnError(unit.idx, unit.seed, None, Step.GENERATE.value, symptom.json_name, reason,
                                   fault.dump))
    for conv in unit.remaining:
        signature = crash_signature("source", Stage.SOURCE, symptom.name, reason, fault.frame)
        verdict = Verdict(symptom, Stage.SOURCE, conv, signature=signature, message=reason)
        outcome.results.append(TestResult.of_verdict(unit.idx, unit.seed, verdict))
    return outcome


def _lost_deciding(work: Assignment, name: str, symptom: Symptom, reason: str, fault: Fault,
                   cases: CaseWriter) -> LostOutcome:
    """A death while deciding whose bug a sent case is: our own error, and the converter's test keeps its finding,
    read back from the case folder (none was written: the test is our own error too)."""
    assert work.unit is not None
    unit, outcome = work.unit, LostOutcome()
    outcome.errors.append(OwnError(unit.idx, unit.seed, name, Step.BLAME.value, symptom.json_name, reason,
                                   fault.dump))
    case, error = cases.kept_undiagnosed(unit.idx, unit.seed, work.case_dir) if work.case_dir else (None, None)
    outcome.errors.extend([error] if error is not None else [])
    if case is None:
        outcome.results.append(TestResult.own_error(unit.idx, unit.seed, name))
        return outcome
    outcome.results.append(TestResult.of_verdict(unit.idx, unit.seed, case.verdict, case.converter_options,
                                                 case_dir=work.case_dir))
    return outcome


def _lost_test(work: Assignment, name: str, symptom: Symptom, reason: str, fault: Fault, cases: CaseWriter,
               errors: list[OwnError]) -> TestResult:
    """The verdict of the converter test the worker was lost in, with its case folder."""
    assert work.unit is not None
    unit, registry = work.unit, cases.registry
    verdict = lost_verdict(name, symptom, reason, fault)
    graph = Graph.from_json(work.graph) if work.graph is not None else None
    options, _ = settled_options(registry[name], cases.worker.options_for(registry[name], unit.seed, graph,
                                                                          work.demoted), graph, unit.seed, work.demoted)
    case_dir = None
    if verdict.is_bug:  # a death in the upstream export is the exporter's bug, filed under the exporter's own test
        case_dir, error = cases.write_lost(unit.idx, unit.seed, verdict, fault.dump, graph, options)
        errors.extend([error] if error is not None else [])
    # The worker was in the converter from the test's start to its death (or the hang's kill).
    spent = max(time.monotonic() - work.phase_start, 0.0)
    return TestResult.of_verdict(unit.idx, unit.seed, verdict, options, {LOST_TIMER: spent}, spent, case_dir)
