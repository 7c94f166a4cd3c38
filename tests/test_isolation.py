"""Isolation: a segfaulting, a hanging and an unboundedly allocating converter each get their verdict, the
campaign goes on with fresh workers, and every other result is recorded.

The faulty converters are real registry entries in a registry instance the campaign loads by reference
(`test_isolation:FAULTY_REGISTRY`), not mocks of a library.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from multiprocessing import Pipe
from pathlib import Path

import numpy as np
import pytest

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import QUEUED_UNITS, Campaign
from fuzzer.campaign.mailbox import Inbox, Outbox
from fuzzer.campaign.messages import RunUnit, Stop, from_json
from fuzzer.campaign.policy.novelty import AVOID_PROBABILITY, HITS_TO_DEMOTE
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.scheduler import Unit
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec, case_folders
from fuzzer.campaign.supervisor import CAMPAIGN_NICE, Slot
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.folder import read_case
from fuzzer.cases.wire import case_message
from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.support.tensors import to_oracle_array
from oracles.verdict import Stage


class _Faulty(Converter):
    libraries = ()
    distributions = ()
    options_type = ConverterOptions


class FaultySegfault(_Faulty):
    name = "faulty-segfault"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable")


class FaultyHang(_Faulty):
    name = "faulty-hang"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        while True:
            time.sleep(0.05)


class FaultyAlloc(_Faulty):
    name = "faulty-alloc"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        chunks = []
        while True:
            chunks.append(np.ones(2**24))  # 128 MiB, touched


class FaultyCrash(_Faulty):
    """A library-style failure whose message names the graph's first operator (one signature per op)."""

    name = "faulty-crash"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        with Steps().at(Stage.NODE_CONVERSION, "convert"):
            raise RuntimeError(f"cannot convert {source.graph.nodes[0].op}")
        raise AssertionError("unreachable")


class FaultyEcho(_Faulty):
    """Returns the eager outputs: always passes; appends the graph's first op to $CONVSMITH_RUN_LOG."""

    name = "faulty-echo"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        log = os.environ.get("CONVSMITH_RUN_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write(source.graph.dumps().replace("\n", "") + "\n")
        pairs = [to_oracle_array(x) for x in source.module(*source.inputs)]
        return TargetRun(tuple(a for a, _ in pairs), tuple(d for _, d in pairs), {"convert": 0.0})


class NicenessEcho(FaultyEcho):
    """Passes, like faulty-echo, and appends its worker's niceness to $CONVSMITH_NICENESS_LOG."""

    name = "faulty-niceness"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        with open(os.environ["CONVSMITH_NICENESS_LOG"], "a") as handle:
            handle.write(f"{os.nice(0)}\n")
        return super().convert_impl(source, options)


FAULTY_REGISTRY = ConverterRegistry([FaultySegfault(), FaultyHang(), FaultyAlloc(), FaultyCrash(), FaultyEcho(),
                                     CONVERTERS["torch-onnx-script"]])
QUICK_REGISTRY = ConverterRegistry([FaultyCrash(), FaultyEcho()])
NICENESS_REGISTRY = ConverterRegistry([NicenessEcho()])


def run_campaign(out: Path, converters: tuple[str, ...], tests: int, registry: str, workers: int = 2,
                 timeout_s: float = 3.0, memory_mb: int = 256, prepare_ahead: bool = False,
                 yield_cpu: bool = False) -> CampaignDB:
    worker = WorkerConfig(out_dir=str(out), log_dir=str(out / LOG_DIR), registry=registry, min_nodes=2, nodes=3,
                          timeout_s=timeout_s, memory_mb=memory_mb, check={"input_budget_s": 0.2},
                          prepare_ahead=prepare_ahead)
    spec = CampaignSpec(100, converters, worker, tests)
    out.mkdir(parents=True, exist_ok=True)
    db = CampaignDB(out / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(out, spec, db, workers, yield_cpu=yield_cpu).run() == "finished"
    return db


@pytest.mark.slow
@pytest.mark.parametrize("prepare_ahead", [False, True], ids=["in-process", "prepared-ahead"])
def test_faulty_converters_get_their_verdicts_and_the_campaign_goes_on(tmp_path: Path, prepare_ahead: bool) -> None:
    """With feeders, a worker that dies holds units queued behind its current one: they are run all the same."""
    names = ("faulty-segfault", "faulty-hang", "faulty-alloc", "faulty-crash", "faulty-echo", "torch-onnx-script")
    db = run_campaign(tmp_path, names, 2, "test_isolation:FAULTY_REGISTRY", prepare_ahead=prepare_ahead)
    rows = db.conn.execute("SELECT idx, seed, converter, symptom FROM tests ORDER BY idx, converter").fetchall()
    assert [(i, s, c) for i, s, c, _ in rows] == [(i, 100 + i, c) for i in range(2) for c in sorted(names)]
    by = {(i, c): symptom for i, _, c, symptom in rows}
    for i in range(2):
        assert by[i, "faulty-segfault"] == "process_death"
        assert by[i, "faulty-hang"] == "hang"
        assert by[i, "faulty-alloc"] == "out_of_memory"
        assert by[i, "faulty-crash"] == "crash"
        assert by[i, "faulty-echo"] == "pass"
        assert by[i, "torch-onnx-script"] not in ("process_death", "hang", "out_of_memory", "own_error")
    # A hung test is killed only once its 3 s timeout has fired, and all of its time is the converter's, not
    # overhead (how long past the timeout the watchdog takes depends on the machine: not asserted).
    hung = [(json.loads(t), wall) for t, wall in
            db.conn.execute("SELECT timings, wall_s FROM tests WHERE converter = 'faulty-hang'")]
    assert [sorted(t) for t, _ in hung] == [["converter_until_lost"]] * 2
    assert all(t["converter_until_lost"] == wall >= 3.0 for t, wall in hung)
    assert db.conn.execute("SELECT COUNT(*) FROM units WHERE done = 1").fetchone()[0] == 2
    assert db.conn.execute("SELECT COUNT(*) FROM errors").fetchone()[0] == 0
    signatures = {r[0] for r in db.conn.execute("SELECT signature FROM bugs")}
    folders = case_folders(tmp_path)
    assert sorted(f.name for f in folders) == sorted(signatures)
    assert {read_case(f).verdict.symptom.json_name for f in folders} >= {"process_death", "hang", "out_of_memory"}
    # The campaign asks a hung worker for its tracebacks before the kill: the case names where it hung.
    hang = next(read_case(f) for f in folders if read_case(f).verdict.symptom.json_name == "hang")
    assert re.search(r'test_isolation\.py", line \d+ in convert_impl', hang.log)


def record_spawns(monkeypatch) -> list[int]:
    """The pid of every worker the campaign starts, in order."""
    import fuzzer.campaign.supervisor as supervision

    spawned: list[int] = []
    original = supervision.Supervisor.spawn

    def recording_spawn(self):
        slot = original(self)
        spawned.append(slot.proc.pid)
        return slot

    monkeypatch.setattr(supervision.Supervisor, "spawn", recording_spawn)
    return spawned


@pytest.mark.slow
@pytest.mark.parametrize("prepare_ahead", [False, True], ids=["in-process", "prepared-ahead"])
def test_workers_are_recycled_between_units_and_nothing_is_lost(tmp_path: Path, monkeypatch,
                                                                prepare_ahead: bool) -> None:
    import fuzzer.campaign.supervisor as supervision

    monkeypatch.setattr(supervision, "RECYCLE_AFTER_TESTS", 2)  # one converter: two units
    spawned = record_spawns(monkeypatch)
    db = run_campaign(tmp_path, ("faulty-echo",), 6, "test_isolation:QUICK_REGISTRY", workers=1,
                      prepare_ahead=prepare_ahead)
    assert db.conn.execute("SELECT COUNT(*) FROM units WHERE done = 1").fetchone() == (6,)
    assert db.conn.execute("SELECT COUNT(*) FROM tests").fetchone() == (6,)
    # The first worker, then a fresh one after every second unit; with feeders a retiring worker first runs the
    # units queued behind its current one.
    assert len(set(spawned)) >= (2 if prepare_ahead else 3)


@pytest.mark.slow
def test_the_campaign_yields_the_cpu_to_its_workers_and_they_keep_their_priority(tmp_path: Path) -> None:
    """Run in a fresh interpreter: the campaign lowers its own priority, which pytest's process must not keep; a
    second campaign in the same process lowers it no further."""
    log = tmp_path / "niceness.log"
    code = ("import os, sys; sys.path.insert(0, {tests!r}); import test_isolation as t; from pathlib import Path; "
            "before = os.nice(0); t.run_campaign(Path({out!r}), ('faulty-niceness',), 4, "
            "'test_isolation:NICENESS_REGISTRY', workers=1, prepare_ahead=True, yield_cpu=True); "
            "t.run_campaign(Path({out!r} + '2'), ('faulty-niceness',), 2, 'test_isolation:NICENESS_REGISTRY', "
            "workers=1, prepare_ahead=True, yield_cpu=True); print(before, os.nice(0))")
    script = code.format(tests=str(Path(__file__).parent), out=str(tmp_path / "c"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=os.environ | {"CONVSMITH_NICENESS_LOG": str(log)})
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = map(int, done.stdout.split()[-2:])
    assert after == max(before, CAMPAIGN_NICE)
    assert set(log.read_text().split()) == {str(before)}  # every test ran at the priority the campaign started with


@pytest.mark.slow
def test_graphs_prepared_ahead_give_every_test_the_verdict_it_gets_in_process(tmp_path: Path) -> None:
    rows = []
    for ahead in (False, True):
        db = run_campaign(tmp_path / str(ahead), ("faulty-crash", "faulty-echo"), 8, "test_isolation:QUICK_REGISTRY",
                          workers=1, prepare_ahead=ahead)
        rows.append(db.conn.execute("SELECT idx, seed, converter, symptom, signature FROM tests "
                                    "ORDER BY idx, converter").fetchall())
        units = [json.loads(t) for (t,) in db.conn.execute("SELECT timings FROM units")]
        assert all(("ahead.generate" in t) == ahead for t in units[1:])  # the first may beat its feeder
    assert len(rows[0]) == 16 and rows[0] == rows[1]


@pytest.mark.slow
def test_a_worker_without_a_feeder_holds_one_unit_queued_behind_its_current_one(tmp_path: Path, monkeypatch) -> None:
    """So that it goes on to the next unit at once, not after a round trip to the campaign at every unit."""
    queued: list[int] = []
    original = Assignment.next_unit

    def counting_next_unit(self: Assignment) -> None:
        queued.append(len(self.ahead))
        original(self)

    monkeypatch.setattr(Assignment, "next_unit", counting_next_unit)
    db = run_campaign(tmp_path, ("faulty-echo",), 6, "test_isolation:QUICK_REGISTRY", workers=1)
    assert db.conn.execute("SELECT COUNT(*) FROM tests").fetchone() == (6,)
    assert len(queued) == 6 and max(queued) == QUEUED_UNITS == 1 and queued[-1] == 0  # the last had none behind it


@pytest.mark.slow
def test_a_worker_grown_past_the_memory_mark_is_replaced_between_units(tmp_path: Path, monkeypatch) -> None:
    import fuzzer.campaign.supervisor as supervision

    monkeypatch.setattr(supervision, "RECYCLE_GROWTH_MB", -1)  # every worker has grown: replaced after each unit
    spawned = record_spawns(monkeypatch)
    db = run_campaign(tmp_path, ("faulty-echo",), 4, "test_isolation:QUICK_REGISTRY", workers=1)
    assert db.conn.execute("SELECT COUNT(*) FROM units WHERE done = 1").fetchone() == (4,)
    assert db.conn.execute("SELECT COUNT(*) FROM tests").fetchone() == (4,)
    # It takes no unit once past the mark and is replaced when it has run the one queued behind its current one.
    assert len(set(spawned)) >= 4 // (QUEUED_UNITS + 1)


@pytest.mark.slow
def test_the_campaign_module_brings_every_lazily_imported_case_renderer() -> None:
    """The campaign process writes every case folder (workers send theirs: case_writer.py); a renderer imported only
    at the first case would come from the checkout as it is then, possibly newer than the rest of the campaign."""
    import subprocess
    import sys

    code = "import sys, fuzzer.campaign.loop; print(sorted(m for m in sys.modules if m in ('fuzzer.cases.report', " \
           "'fuzzer.cases.repro')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['fuzzer.cases.report', 'fuzzer.cases.repro']"


class _NeedsAMissingLibrary(FaultyEcho):
    name = "faulty-missing-library"
    libraries = ("no_such_library_for_convsmith",)


def test_the_fork_server_preloads_the_libraries_of_the_campaigns_available_converters(tmp_path: Path) -> None:
    """torch.onnx is imported once in the fork server, not by each new worker; a converter that cannot import its
    library adds nothing (an import error there would stop the fork server)."""
    registry = ConverterRegistry([_NeedsAMissingLibrary(), FaultyEcho(), CONVERTERS["torch-onnx-script"]])
    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR))
    spec = CampaignSpec(0, ("faulty-missing-library", "faulty-echo", "torch-onnx-script"), worker)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    campaign = Campaign(tmp_path, spec, db, workers=1, registry=registry)
    assert campaign.preloaded_libraries() == ["torch", "torch.onnx", "onnx", "onnxruntime"]


@pytest.mark.slow
def test_the_fork_servers_warm_start_registers_the_exporter_and_leaves_one_thread() -> None:
    """fuzzer.campaign.warm_start runs a first export in the fork server (workers then start warm) without starting a
    thread (no forked worker would have it); without torch.onnx preloaded it imports nothing."""
    import subprocess
    import sys

    code = ("import os, sys, torch.onnx, onnx; threads = len(os.listdir('/proc/self/task')); "
            "import fuzzer.campaign.warm_start; print(len(os.listdir('/proc/self/task')) - threads, "
            "'torch.onnx._internal.torchscript_exporter.symbolic_opset17' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True"], out.stderr[-2000:]
    bare = "import sys, fuzzer.campaign.warm_start; print('torch' in sys.modules, 'onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", bare], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def _campaign_running_one_unit(out: Path, demote_known: bool = False) -> tuple[Campaign, Slot]:
    worker = WorkerConfig(out_dir=str(out), log_dir=str(out / LOG_DIR), demote_known=demote_known)
    campaign = Campaign(out, CampaignSpec(0, ("torch-onnx-script",), worker), CampaignDB(out / DB_NAME, create=True),
                        workers=1)
    campaign.recorder.start(1)
    campaign.db.add_unit(0, 5)
    return campaign, Slot(proc=None, conn=None, started=0.0, work=Assignment(unit=Unit(0, 5, ["torch-onnx-script"])))


def _sent_case_and_result() -> tuple[dict, dict]:
    from test_case import make_case

    options = CONVERTERS["torch-onnx-script"].options({}).to_json()
    case = dataclasses.replace(make_case(), converter="torch-onnx-script", converter_options=options)
    result = TestResult(0, 5, "torch-onnx-script", "crash", "node_conversion", case.signature, True,
                        message="E: boom", case_dir=case.id)
    return case_message(case), result.to_message()


def test_the_campaign_sends_the_demotions_only_when_they_change_and_the_worker_gives_each_unit_its_own(
        tmp_path: Path) -> None:
    campaign, slot = _campaign_running_one_unit(tmp_path, demote_known=True)
    to_worker, at_worker = Pipe()
    slot.conn = to_worker
    for idx in range(2):
        campaign.send_unit(slot, Unit(idx, idx, ["torch-onnx-script"]))
    for _ in range(HITS_TO_DEMOTE):
        campaign.recorder.novelty.record("sig", [("roll", "bool")])
    for idx in range(2, 4):
        campaign.send_unit(slot, Unit(idx, idx, ["torch-onnx-script"]))
    campaign.supervisor.send(slot, Stop())
    inbox = Inbox(at_worker)
    while at_worker.poll(0):
        inbox.receive()
    demotion = ("roll", "bool", AVOID_PROBABILITY)
    assert [(m.idx, m.demoted) if isinstance(m, RunUnit) else m for m in inbox.pending] == [
        (0, ()), (1, ()), (2, (demotion,)), (3, (demotion,)), Stop()]
    assert inbox.demoted == (demotion,)  # from one "demoted" message, sent once


def test_the_campaign_writes_the_case_a_worker_sends_with_its_result(tmp_path: Path) -> None:
    campaign, slot = _campaign_running_one_unit(tmp_path)
    case, result = _sent_case_and_result()
    for msg in (case, result):  # in this order, as one frame: worker.Outbox
        campaign.handle(slot.work, from_json(msg))
    assert read_case(tmp_path / result["case_dir"]).to_json() == case["case"]
    assert campaign.db.conn.execute("SELECT case_dir FROM bugs").fetchall() == [(result["case_dir"],)]
    assert campaign.db.conn.execute("SELECT COUNT(*) FROM errors").fetchone() == (0,)


def test_a_sent_case_the_campaign_cannot_write_is_its_own_error_and_its_result_names_no_folder(tmp_path: Path) -> None:
    campaign, slot = _campaign_running_one_unit(tmp_path)
    case, result = _sent_case_and_result()
    case["case"]["seed"] = "three"
    for msg in (case, result):
        campaign.handle(slot.work, from_json(msg))
    assert not (tmp_path / result["case_dir"]).exists()
    assert campaign.db.conn.execute("SELECT case_dir FROM bugs").fetchall() == [(None,)]  # the bug is still counted
    assert campaign.db.conn.execute("SELECT phase, seed, converter FROM errors").fetchall() == \
           [("case", 5, "torch-onnx-script")]


def test_a_worker_sends_a_new_case_with_the_result_that_names_it_in_one_frame_and_never_twice(tmp_path: Path) -> None:
    """A case goes out before deciding whose bug it is (a death there keeps it: test_blame_death.py), the diagnosed
    case with the result that names it; the worker writes no folder itself, and a signature it already sent is not
    made again."""
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=1, nodes=1,
                          include_ops=("relu",), check={"input_budget_s": 0.2})
    frames: list[bytes] = []
    outbox = Outbox(frames.append)
    runner = UnitRunner(config, QUICK_REGISTRY, outbox)
    for idx in range(2):  # two graphs of one relu: one signature
        runner.run_unit(idx, 7 + idx, ("faulty-crash",))
    outbox.flush()  # as the worker does before it waits for a unit
    frames_of_types = [[m["type"] for m in json.loads(f)] if f.startswith(b"[") else [json.loads(f)["type"]]
                       for f in frames]
    # The diagnosed case and its result go out together, before the next unit is generated in process.
    assert frames_of_types == [["graph"], ["prepared", "phase"], ["phase"], ["case"], ["phase"], ["case", "result"],
                               ["graph"], ["prepared", "phase"], ["result"]]
    first, (case, result) = json.loads(frames[3]), json.loads(frames[5])
    assert not first["replace"] and case["replace"] and first["case"]["id"] == case["case"]["id"]
    assert result["case_dir"] == case["case"]["id"] and result["is_bug"]
    assert json.loads(frames[8])["case_dir"] == result["case_dir"]  # the second test names the case, not resent
    assert list(tmp_path.iterdir()) == []  # nothing written by the worker
