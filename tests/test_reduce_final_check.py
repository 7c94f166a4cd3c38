"""The full check of a reduced graph is tried again before the reduction is given up: a defect in native code dies
by one signal in one run and by another in the next, and a diagnosis past the checker's timeout reads as a hang.

`ScriptedFakeChecker` is a fake of convsmith's own isolated checker (not of a system under test): its `write_case`
answers with the verdicts the test scripts, one per call, and records whether it was asked to diagnose.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fuzzer.cases.case import CaseData
from fuzzer.reduce.case import FINAL_TRIES, NotReproducedAlone, ReductionFailed, _write_checked
from fuzzer.reduce.isolated import Job
from generators.edit import prefix
from generators.generator import GenOptions, generate
from oracles.verdict import Stage, Symptom, Verdict

CONVERTER = "onnx2tf"


def death(signal: str, frame: str) -> Verdict:
    return Verdict(Symptom.PROCESS_DEATH, Stage.NONE, CONVERTER, signature=f"crash-onnx2tf-none-{signal}-{frame}",
                   message=f"process_death: killed by {signal} in {frame}")


HANG = Verdict(Symptom.HANG, Stage.NONE, CONVERTER, signature="crash-onnx2tf-none-HANG-x",
               message="hang: no result after 60 s")


class ScriptedFakeChecker:
    """Answers each write_case with the next scripted verdict, writing an empty folder as the case."""

    def __init__(self, verdicts: list[Verdict]) -> None:
        self.verdicts = verdicts
        self.calls: list[tuple[bool, Mapping[str, Any] | None]] = []  # (diagnose, reduction record) per call

    def write_case(self, job: Job, out_dir: Path, case_id: str, original: str | None,
                   reduction: Mapping[str, Any] | None, diagnose: bool = True) -> tuple[Path, Verdict]:
        self.calls.append((diagnose, reduction))
        folder = out_dir / case_id
        folder.mkdir(parents=True, exist_ok=True)
        return folder, self.verdicts[len(self.calls) - 1]


def case_of(verdict: Verdict) -> CaseData:
    graph = generate(3, GenOptions(nodes=2))
    return CaseData(id="found", signature=verdict.signature, graph=graph, seed=3, converter=CONVERTER,
                    converter_options={}, verdict=verdict, versions={}, input_names=(), output_names=(),
                    created="2026-12-06")


def write(case: CaseData, checker: ScriptedFakeChecker, tmp_path: Path, reduced: bool = False) -> Path:
    """_write_checked on the case's graph, or with `reduced`, on its first node alone."""
    graph = prefix(case.graph, 1) if reduced else case.graph
    job = Job(graph, case.seed, case.converter, {})
    return _write_checked(case, job, tmp_path, checker, "found", {"polished": True}, True)  # type: ignore[arg-type]


def test_a_death_by_another_signal_is_checked_again_and_kept_when_the_next_run_dies_as_the_case_did(
        tmp_path: Path) -> None:
    case = case_of(death("SIGSEGV", "ops.py:1078"))
    checker = ScriptedFakeChecker([death("SIGABRT", "ops.py:1078"), death("SIGSEGV", "ops.py:2000")])
    assert write(case, checker, tmp_path) == tmp_path / "found-reduced"
    assert [diagnose for diagnose, _ in checker.calls] == [True, True]


def test_a_reduced_case_whose_diagnosis_runs_past_the_timeout_is_written_again_undiagnosed_to_be_polished(
        tmp_path: Path) -> None:
    case = case_of(death("SIGSEGV", "ops.py:1078"))
    checker = ScriptedFakeChecker([HANG, death("SIGSEGV", "ops.py:1078")])
    write(case, checker, tmp_path)
    assert checker.calls == [(True, {"polished": True}), (False, {"polished": False})]


def test_a_hang_case_is_not_written_undiagnosed_for_hanging_again(tmp_path: Path) -> None:
    case = case_of(HANG)
    other = death("SIGSEGV", "ops.py:1078")
    checker = ScriptedFakeChecker([other, HANG])
    write(case, checker, tmp_path)
    assert [diagnose for diagnose, _ in checker.calls] == [True, True]


def test_a_reduction_is_given_up_after_every_try_shows_another_bug_naming_each(tmp_path: Path) -> None:
    case = case_of(death("SIGSEGV", "ops.py:1078"))
    others = [Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, CONVERTER, signature=f"wrong_values-x-{i}")
              for i in range(FINAL_TRIES)]
    checker = ScriptedFakeChecker(others)
    with pytest.raises(ReductionFailed) as failed:
        write(case, checker, tmp_path, reduced=True)
    assert len(checker.calls) == FINAL_TRIES == 3 and not isinstance(failed.value, NotReproducedAlone)
    assert str(failed.value) == ("found: the reduced graph gives wrong_values-x-0, then wrong_values-x-1, then "
                                 "wrong_values-x-2 under the full check, not crash-onnx2tf-none-SIGSEGV-ops.py:1078")


def test_a_case_whose_own_graph_does_not_show_its_bug_alone_is_given_up_saying_so(tmp_path: Path) -> None:
    """A worker's death that came from what the worker ran before (a heap an earlier test corrupted)."""
    case = case_of(death("SIGABRT", "context.py:1012"))
    upstream = Verdict(Symptom.CRASH, Stage.RUNTIME_LOAD, CONVERTER, signature="crash-onnx2tf-upstream-load")
    checker = ScriptedFakeChecker([upstream] * FINAL_TRIES)
    with pytest.raises(NotReproducedAlone) as failed:  # the campaign marks the case (test_reduce_isolated.py)
        write(case, checker, tmp_path)
    assert str(failed.value) == ("found: checked alone, the case's own graph gives crash-onnx2tf-upstream-load, then "
                                 "crash-onnx2tf-upstream-load, then crash-onnx2tf-upstream-load, not "
                                 "crash-onnx2tf-none-SIGABRT-context.py:1012: its bug does not reproduce outside the "
                                 "campaign's worker")
