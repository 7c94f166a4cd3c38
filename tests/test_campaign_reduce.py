"""A campaign minimizes each new bug case in the background, inside the case folder, and says so.

The bug is planted through the registry (`test_campaign_reduce:PLANTED_REGISTRY`): the TorchScript exporter with a
crash on every graph that holds an elu, not an upstream bug that a release may fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from fuzzer.campaign.reduce_queue import REDUCE_CHILD_LOGS
from fuzzer.campaign.spec import LOG_DIR, case_folders
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript
from oracles.verdict import Stage

TESTS = Path(__file__).parent
ROOT = TESTS.parent


class CrashesOnElu(TorchOnnxScript):
    """The TorchScript exporter, but its elu has no symbolic: a deterministic crash at node conversion."""

    name = "planted-elu-crash"
    repro_conversion = ""  # its crash is in no call a script can make: its repro.py says so

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        if any(node.op == "elu" for node in source.graph.nodes):
            with Steps().at(Stage.NODE_CONVERSION, "convert"):
                raise RuntimeError("planted: no symbolic for elu")
        return super().convert_impl(source, options)


PLANTED_REGISTRY = ConverterRegistry([CrashesOnElu()])


def run_fuzz(out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "fuzzer", "fuzz", "--tests", "2", "--workers", "1", "--registry",
               "test_campaign_reduce:PLANTED_REGISTRY", "--converters", CrashesOnElu.name, "--ops", "elu",
               "--dtypes", "float32", "--nodes", "2", "--out", str(out), "--reduce-time", "20s", *extra]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}")
    return subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env=env,
                          cwd=ROOT)


@pytest.mark.slow
def test_new_bug_cases_are_reduced_inside_their_folder(tmp_path: Path) -> None:
    done = run_fuzz(tmp_path / "c")
    assert done.returncode == 0, done.stderr
    folders = case_folders(tmp_path / "c")
    assert len(folders) == 1
    reduced = [p for p in folders[0].iterdir() if p.name.endswith("-reduced")]
    assert len(reduced) == 1
    case = json.loads((reduced[0] / "case.json").read_text())
    assert case["original"] == folders[0].name  # the case id, never a local path
    assert len(case["graph"]["nodes"]) == 1
    # Without --time the drain has no deadline: the case is reduced in its two steps, the polish last.
    assert case["reduction"]["polished"] is True and case["reduction"]["earlier"]["polished"] is False
    assert "reduction: 1 new cases minimized, 0 failed" in done.stdout
    assert "1 reduced cases polished, 0 left to polish" in done.stdout
    # The reducer's checking processes log into the campaign's folder, never a temporary one a kill would leave.
    assert sorted(p.suffix for p in (tmp_path / "c" / LOG_DIR / REDUCE_CHILD_LOGS).iterdir()) == [".fault", ".log"]
    # Its repro.py, copied alone, runs without this project: the source checks out against the saved outputs, and
    # it says it has no call of a converter planted here (exit 3); tests/test_repro.py runs real cases' repro.py.
    alone = tmp_path / "alone"
    shutil.copytree(reduced[0], alone)
    boot = f"import sys, runpy; sys.path.append({sysconfig.get_paths()['purelib']!r}); " \
           "runpy.run_path('repro.py', run_name='__main__')"
    shown = subprocess.run([sys.executable, "-I", "-S", "-c", boot], cwd=alone, capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"}, timeout=300)
    assert shown.returncode == 3 and "eager PyTorch matches the saved expected outputs" in shown.stdout, shown.stderr
    assert shown.stderr.strip() == f"repro.py: cannot run: it has no call of {CrashesOnElu.name}"


@pytest.mark.slow
def test_no_reduce_leaves_cases_as_found(tmp_path: Path) -> None:
    done = run_fuzz(tmp_path / "c", "--no-reduce")
    assert done.returncode == 0, done.stderr
    (folder,) = case_folders(tmp_path / "c")
    assert not [p for p in folder.iterdir() if p.name.endswith("-reduced")]
    assert "reduction:" not in done.stdout


@pytest.mark.slow
def test_avoid_unsupported_without_a_probe_cache_is_one_clear_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "fuzzer", "fuzz", "--tests", "1", "--out", str(tmp_path / "c"),
               "--avoid-unsupported", "torch-onnx-script"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "convsmith fuzz: --avoid-unsupported: no probe cache for torch-onnx-script at these library versions; "
        "run `convsmith probe --converters torch-onnx-script` first")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "c").exists()


def test_the_first_case_of_each_root_cause_is_reduced_first_and_a_case_hit_again_before_them(tmp_path: Path) -> None:
    """Three signatures, two root causes: the second signature of a root cause waits behind the other cause, until a
    test meets its bug again."""
    import dataclasses

    from test_case import make_case

    from fuzzer.campaign.reduce_queue import ReduceQueue, ReducerConfig
    from fuzzer.cases.folder import write_case

    def case(name: str, message: str) -> Path:
        base = make_case(name)
        verdict = dataclasses.replace(base.verdict, message=message)
        return write_case(tmp_path, dataclasses.replace(base, verdict=verdict))

    first = case("crash-a-1", "builtins.AssertionError: len(shifts)=1 != len(dims)=0")
    same = case("crash-a-2", "builtins.AssertionError: len(shifts)=2 != len(dims)=1")  # numbers are evidence
    other = case("crash-b-1", "builtins.ValueError: only one element tensors can be converted")
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    for folder in (first, same, other):
        queue.add(folder)
    assert list(queue.pending) == [first, other] and list(queue.later) == [same] and queue.waiting == 3
    # A case whose bug is met again while it waits goes first, from either queue; one not waiting is left alone.
    queue.hit(same)
    assert list(queue.pending) == [same, first, other] and not queue.later
    queue.hit(other)
    queue.hit(tmp_path / "crash-c-1")
    assert list(queue.pending) == [other, same, first] and queue.waiting == 3


def test_the_time_kept_back_for_reductions_is_not_set_by_one_slow_first_case(tmp_path: Path) -> None:
    """The campaign stops testing `reserve_s` before its budget ends; the per-case mean it multiplies starts from
    FIRST_GUESS_S counted as GUESS_WEIGHT cases, and moves to the measured mean as cases are reduced."""
    from fuzzer.campaign.reduce_queue import FIRST_GUESS_S, GUESS_WEIGHT, START_S, ReduceQueue, ReducerConfig

    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    assert queue.reserve_s(1) == 0.0  # nothing to reduce
    queue.pending.extend(tmp_path / f"case-{i}" for i in range(4))
    assert queue.reserve_s(2) == START_S + 4 * FIRST_GUESS_S / 2
    queue.seconds.append(FIRST_GUESS_S + 4 * GUESS_WEIGHT)  # one slow case: the mean moves by a quarter of it
    assert queue.reserve_s(1) == START_S + 4 * (FIRST_GUESS_S + GUESS_WEIGHT)
    queue.seconds[:] = [2.0] * 1000  # many fast ones: the guess no longer counts
    assert abs(queue.reserve_s(1) - (START_S + 4 * 2.0)) < 0.3
    queue.polish.extend(tmp_path / f"case-{i}-reduced" for i in range(9))
    assert abs(queue.reserve_s(1) - (START_S + 4 * 2.0)) < 0.3  # polishing is done with time left, not kept for


def test_a_reduced_case_waits_to_be_polished_behind_every_case_to_reduce_and_a_resume_finds_it(tmp_path: Path) -> None:
    """A shape-only reduced case (reduction.polished false) is polished after every case still to reduce; on resume
    the queue finds it again, but not a polished one, nor one whose polish failed before."""
    import dataclasses

    from test_case import make_case

    from fuzzer.campaign.reduce_queue import FAILED_LIST, ReduceQueue, ReducerConfig
    from fuzzer.cases.case_head import read_case_head
    from fuzzer.cases.folder import write_case

    def reduced(name: str, polished: bool) -> Path:
        folder = write_case(tmp_path, make_case(name))
        record = {"nodes_before": 3, "size_before": [3], "polished": polished}
        write_case(folder, dataclasses.replace(make_case(f"{name}-reduced"), reduction=record, original=name))
        return folder

    shaped, done, refused = reduced("crash-a-1", False), reduced("crash-b-1", True), reduced("crash-c-1", False)
    (tmp_path / FAILED_LIST).write_text("crash-c-1-reduced\n")
    fresh = write_case(tmp_path, make_case("crash-d-1"))
    queue = ReduceQueue(tmp_path, ReducerConfig(1.0, "fuzzer.converters:CONVERTERS"))
    queue.requeue([shaped, done, refused, fresh])
    # The fresh case's root cause (make_case's one) has reduced cases already: it waits behind other causes.
    assert list(queue.polish) == [shaped / "crash-a-1-reduced"] and list(queue.later) == [fresh]
    assert queue.waiting == 1 and queue._next() is queue.later
    assert not read_case_head(shaped / "crash-a-1-reduced").polished
    assert read_case_head(done / "crash-b-1-reduced").polished
    queue.later.clear()
    assert queue._next() is queue.polish


def test_a_case_that_hangs_queues_as_the_first_of_its_root_cause_and_is_reckoned_at_its_budget_and_a_timeout(
        tmp_path: Path) -> None:
    """Each check of a hang waits out the timeout: its reduction takes the case's budget and the final check's
    timeout, which the reserve counts for it; behind every other root cause it had waited until the end."""
    import dataclasses

    from test_case import make_case

    from fuzzer.campaign.reduce_queue import ReduceQueue, ReducerConfig
    from fuzzer.cases.folder import write_case
    from oracles.verdict import Stage, Symptom, Verdict

    base = make_case("crash-x-none-HANG-0123456789ab")
    hang = Verdict(Symptom.HANG, Stage.NONE, "x", signature=base.id, message="timed out after 60 s")
    hanging = write_case(tmp_path, dataclasses.replace(base, verdict=hang))
    crash = write_case(tmp_path, make_case())
    queue = ReduceQueue(tmp_path, ReducerConfig(30.0, "fuzzer.converters:CONVERTERS", timeout_s=45.0))
    queue.add(hanging)
    queue.add(crash)
    assert list(queue.pending) == [hanging, crash] and not queue.later
    queue.seconds.extend([10.0] * 7)  # with the first guess: 10 s a case
    assert queue.estimate_s(1, 0.0) == 8.0 + 75.0 + 10.0  # a reducer's start, the hang's 30 + 45 s, the crash
    queue._done(hanging, ok=True, seconds=80.0)
    assert queue.hanging == set() and queue.seconds == [10.0] * 7  # not in the mean


def test_after_the_deadline_only_a_case_filed_since_starts_and_only_where_its_expected_time_fits(
        tmp_path: Path) -> None:
    """A case filed by a unit that finished in its grace was in no reserve: the drain starts it after the deadline
    if the per-case mean (a hang's budget and timeout) ends before the drain's end; a case that waited at the
    deadline does not start."""
    import dataclasses

    from test_case import make_case

    from fuzzer.campaign.reduce_queue import ReduceQueue, ReducerConfig
    from fuzzer.cases.folder import write_case
    from oracles.verdict import Stage, Symptom, Verdict

    queue = ReduceQueue(tmp_path, ReducerConfig(30.0, "fuzzer.converters:CONVERTERS", timeout_s=45.0))
    queue.seconds.extend([10.0] * 7)  # with the first guess: 10 s a case
    waited = write_case(tmp_path, make_case("crash-a-1"))
    queue.add(waited)
    deadline = queue.queued_at[waited] + 1.0
    base = make_case("crash-x-none-HANG-0123456789ab")
    hang = Verdict(Symptom.HANG, Stage.NONE, "x", signature=base.id, message="timed out after 60 s")
    hanging = write_case(tmp_path, dataclasses.replace(base, verdict=hang))
    late = write_case(tmp_path, make_case("crash-b-1"))
    for folder in (hanging, late):
        queue.add(folder)
        queue.queued_at[folder] = deadline + 2.0
    end = queue.queued_at[waited] + 30.0  # 29 s left: the crash's 10 s fit, the hang's 75 s do not
    assert queue._next_case((deadline, end)) == (queue.later, late)
    assert queue._next_case((deadline, end + 60.0)) == (queue.pending, hanging)
    assert queue._next_case(None) == (queue.pending, waited)
    queue.later.clear()
    assert queue._next_case((deadline, end)) is None
