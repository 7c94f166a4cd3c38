"""The campaign loop: N long-lived workers, fed units, their results recorded, until the budget is spent.

Seeds are seed_base + unit index. The campaign process is the only database writer: it commits each test result as
it arrives and marks a unit done with its last result, so a campaign killed at any point resumes without repeating a
committed test. It also writes every case folder, from the case a worker sends with the result that names it, so the
worker spends no time on files. A worker that segfaults, aborts, hangs or outgrows its memory becomes a
PROCESS_DEATH, HANG or OUT_OF_MEMORY verdict for the converter it was running, and is replaced.

The parts, one job each: the Scheduler picks units, the Supervisor runs the worker processes, the messages module
is the protocol, the Recorder writes the database and keeps the novelty bookkeeping, lost.py and case_writer.py
turn a lost worker into results and cases. This module only joins them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.bisect_queue import BisectQueue
from fuzzer.campaign.budget import Budget, format_budget
from fuzzer.campaign.case_writer import CaseWriter
from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.lost import lost_outcome
from fuzzer.campaign.messages import (
    CaseSent,
    Demotions,
    Message,
    OwnError,
    PhaseStarted,
    RunUnit,
    UnitFailed,
    UnitGraph,
    UnitPrepared,
)
from fuzzer.campaign.progress import Progress
from fuzzer.campaign.recorder import Recorder
from fuzzer.campaign.reduce_queue import ReduceQueue, ReducerConfig
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.scheduler import Scheduler, Unit
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec, case_folders
from fuzzer.campaign.supervisor import HOUSEKEEPING_S, Slot, Supervisor
from fuzzer.campaign.zoo_unit import reducible_findings
from fuzzer.converters import ConverterRegistry, load_registry
from fuzzer.support.errors import DiskFull, is_disk_full
from fuzzer.support.faults import Fault
from oracles.verdict import Symptom

DISK_FULL = "disk full"  # the status of a campaign stopped by a full device (resumable once there is space)

# Units queued behind a worker's current one when it prepares ahead: room for its feeder to get through a slow unit
# (a long input search, a hard graph) before the worker runs dry; a worker's death loses what its feeder holds.
AHEAD_UNITS = 16
# Without a feeder, one unit queued behind the current one: the worker goes on to it at once, where it waited for
# this process to record its last result and send the next unit at every unit.
QUEUED_UNITS = 1


@dataclass
class Campaign:
    """Run a campaign in `out_dir` until the budget is spent, every unit is done, or Ctrl-C."""

    out_dir: Path
    spec: CampaignSpec
    db: CampaignDB
    workers: int
    time_s: float | None = None  # this session's budget; None: until done or Ctrl-C
    progress: Progress | None = None
    mp_context: str = "forkserver"
    registry: ConverterRegistry | None = None
    reduce_budget_s: float | None = None  # minimize each new bug case in the background; None: don't
    bisect: bool = False  # bisect each new root cause's (reduced) case in one background process (bisect_queue.py)
    # Lower this process's priority (and its reducer's) below the workers' once they are forked, where they hold units
    # queued ahead (prepare-ahead), so that its latency never stalls one (Supervisor.yield_to_workers).
    yield_cpu: bool = False
    started: float | None = None  # time.monotonic() the time budget counts from (the process's start); None: run()'s
    engine: str = "local"  # the workers: local processes, or "ray": actors across a Ray cluster (ray_engine.py)
    ray_address: str | None = None  # the Ray cluster's HOST:PORT; None: one started on this machine
    show_libraries: bool = False  # -v: what the libraries print in the fork server reaches the terminal, not a log

    def __post_init__(self) -> None:
        self.registry = self.registry or load_registry(self.spec.worker.registry)
        self.log_dir = self.out_dir / LOG_DIR
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.scheduler = Scheduler(self.spec, self.db)
        self.recorder = Recorder(self.db, self.log_dir, self.spec.worker.demote_known)
        self.cases = CaseWriter(self.out_dir, self.registry, self.spec.worker)
        self.supervisor = self.start_engine()
        self.stopping = False
        self.last_beat = 0.0
        self.reducer: ReduceQueue | None = None
        self.bisector = BisectQueue(self.log_dir, self.reduce_budget_s is not None) if self.bisect else None
        self.budget: Budget | None = None
        self.tests_started: float | None = None  # the first unit sent
        self.tests_stopped: float | None = None
        self.ended: float | None = None
        self.disk_full = ""  # what could not be written, once the device is full
        if self.reduce_budget_s is not None:
            worker = self.spec.worker
            config = ReducerConfig(self.reduce_budget_s, worker.registry, worker.timeout_s, worker.memory_mb)
            self.reducer = ReduceQueue(self.log_dir, config)
            zoo = reducible_findings(self.out_dir, self.registry)
            self.reducer.requeue(case_folders(self.out_dir) + zoo)

    # ---- the loop -----------------------------------------------------------------------------------------

    def run(self) -> str:
        """'finished' (budget spent or all done), 'time' (time budget), 'interrupted' (Ctrl-C) or DISK_FULL."""
        self.recorder.start(self.workers)
        self.recorder.adopt_orphans(self.out_dir)
        self.scheduler.resume()
        if self.time_s is not None:
            self.budget = Budget(time.monotonic() if self.started is None else self.started, self.time_s)
        status = "finished"
        try:
            self.supervisor.start(self.workers, self.yield_cpu)
            grace_end = None
            while True:
                now = time.monotonic()
                if not self.stopping and self.budget is not None and self.budget.stop_testing(now, self.wanted_s()):
                    self.stopping, status, self.tests_stopped = True, "time", now
                    grace_end = self.budget.grace_end(now, self.spec.worker.timeout_s)
                self.dispatch()
                if not self.supervisor.busy() and (self.stopping or not self.scheduler.more_work()):
                    break
                if grace_end is not None and now > grace_end:
                    break  # in-flight units stay unfinished: a resume completes them
                self.turn()
        except KeyboardInterrupt:
            status = "interrupted"
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            status, self.disk_full = DISK_FULL, self.full_message(exc)
        finally:
            self.tests_stopped = self.tests_stopped or time.monotonic()
            self.supervisor.shutdown()
            self.end_session(status)
            self.finish_reductions(status)
            if self.bisector is not None:
                self.bisector.close()
            self.ended = time.monotonic()
            if self.progress is not None:
                self.progress.close(self.recorder.counts)
        return status

    def turn(self) -> None:
        """One turn of the loop: the workers' messages and troubles, a reduction step, the heartbeat."""
        self.supervisor.poll(0.2)
        self.supervisor.watch()
        if self.reducer is not None:
            self.reducer.step(self.reducer.reducers_beside(self.workers))
        if self.bisector is not None:
            self.bisector.step()
        if time.monotonic() - self.last_beat >= HOUSEKEEPING_S:
            self.recorder.beat()
            self.last_beat = time.monotonic()
        if self.progress is not None:
            self.progress.update(self.recorder.counts)

    def start_engine(self) -> Any:
        """The Supervisor of local worker processes, or the Ray engine (imported only then: Ray is an extra)."""
        if self.engine == "ray":
            from fuzzer.campaign.ray_engine import RayEngine

            return RayEngine(self.spec.worker, self.log_dir, self, self.preloaded_libraries(), self.ray_address)
        return Supervisor(self.spec.worker, self.log_dir, self, self.mp_context, self.preloaded_libraries(),
                          self.show_libraries)

    def preloaded_libraries(self) -> list[str]:
        """The campaign's converters' libraries, imported once in the fork server rather than in every worker: a
        worker started after a crash then converts at once."""
        assert self.registry is not None
        converters = [self.registry[name] for name in self.spec.converters if name in self.registry]
        return list(dict.fromkeys(lib for conv in converters if conv.availability()[0] for lib in conv.libraries))

    def wanted_s(self) -> float:
        """What reducing every case still waiting would take once the tests end (the budget caps what it keeps)."""
        return 0.0 if self.reducer is None else self.reducer.reserve_s(self.workers)

    def end_session(self, status: str) -> None:
        """Record the session's end; on a full device that may fail too (the session then reads as cut short)."""
        try:
            self.recorder.end(status)
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            self.disk_full = self.disk_full or self.full_message(exc)

    def full_message(self, exc: BaseException) -> str:
        return str(exc) if isinstance(exc, DiskFull) else f"no space left in {self.out_dir} ({exc})"

    def finish_reductions(self, status: str) -> None:
        """A campaign that ended its tests reduces the waiting cases, one reducer per worker, until its budget ends
        (those left, and all on Ctrl-C, are reduced on resume)."""
        if self.reducer is None:
            return
        try:
            if status in ("interrupted", DISK_FULL):
                self.reducer.close(wait_s=0)
            elif self.budget is None:
                self.reducer.drain(self.workers)
            else:
                self.reducer.drain(self.workers, self.budget.deadline, self.budget.end)
        except KeyboardInterrupt:
            self.reducer.close(wait_s=0)

    def time_line(self) -> str | None:
        """Where the time budget went, once the campaign has run; None without one."""
        if self.budget is None or self.ended is None:
            return None
        return format_budget(self.budget, self.tests_started, self.tests_stopped, self.ended)

    # ---- units out ----------------------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Give each idle worker a unit and keep more queued behind its current one: AHEAD_UNITS with feeders,
        QUEUED_UNITS without (a worker due for recycling gets none, so that it comes to rest)."""
        if self.stopping:
            return
        queued = AHEAD_UNITS if self.spec.worker.prepare_ahead else QUEUED_UNITS
        for slot in self.supervisor.available():
            if not slot.work.busy:
                unit = self.scheduler.next_unit()
                if unit is None:
                    return
                self.tests_started = self.tests_started or time.monotonic()
                self.send_unit(slot, unit)
                slot.work.begin(unit)
            while len(slot.work.ahead) < queued:
                unit = self.scheduler.next_unit()
                if unit is None:
                    return
                self.send_unit(slot, unit)
                slot.work.ahead.append(unit)

    def send_unit(self, slot: Slot, unit: Unit) -> None:
        """Send `unit`, after the demotions in force when they changed since the last unit (mailbox.Inbox)."""
        demoted = self.recorder.demotions_in_force(self.spec.converters)
        if demoted is not slot.work.demoted and demoted != slot.work.demoted:
            self.supervisor.send(slot, Demotions(tuple(demoted)))
            slot.work.demoted = demoted
        self.supervisor.send(slot, RunUnit(unit.idx, unit.seed, tuple(unit.remaining)))

    # ---- what the supervisor tells (supervisor.Listener) --------------------------------------------------

    def handle(self, work: Assignment, msg: Message) -> None:
        """One message of the worker doing `work`."""
        unit = work.unit
        if isinstance(msg, PhaseStarted):
            work.started(msg)
        elif isinstance(msg, UnitGraph):
            work.graph_known(msg)
            self.recorder.unit_graph(msg)
        elif isinstance(msg, UnitPrepared):
            self.recorder.unit_info(msg.idx, work.nodes, dict(msg.timings), msg.values)
        elif isinstance(msg, OwnError):
            self.recorder.own_error(msg)
        elif isinstance(msg, UnitFailed) and unit is not None:
            self.recorder.unit_info(msg.idx, work.nodes, dict(msg.timings))
            for name in list(unit.remaining):
                self.commit(work, TestResult.own_error(unit.idx, unit.seed, name))
        elif isinstance(msg, CaseSent) and unit is not None:
            work.case_dir, error = self.cases.write_sent(unit.idx, unit.seed, msg)
            if error is not None:
                self.recorder.own_error(error)
        elif isinstance(msg, TestResult) and unit is not None:
            if msg.case_dir is not None and not (self.out_dir / msg.case_dir).is_dir():
                msg = dataclasses.replace(msg, case_dir=None)  # its case could not be written
            self.commit(work, msg)

    def lost(self, work: Assignment, symptom: Symptom, reason: str, fault: Fault) -> None:
        """The worker died or was killed mid-unit: a verdict for what it ran; the rest of the unit is requeued."""
        outcome = lost_outcome(work, symptom, reason, fault, self.cases)
        for error in outcome.errors:
            self.recorder.own_error(error)
        for result in outcome.results:
            self.commit(work, result)
        if work.unit is not None and work.unit.remaining:
            self.scheduler.give_back([work.unit])
        work.unit = None

    def released(self, units: Sequence[Unit]) -> None:
        self.scheduler.give_back(units)

    def commit(self, work: Assignment, result: TestResult) -> None:
        """Record one test of the current unit (once); a new bug's case folder joins the reduce queue."""
        if not work.takes(result.converter):
            return
        unit_done = work.complete(result.converter)
        new_bug = self.recorder.test(result, work.pairs, unit_done)
        if result.case_dir and self.reducer is not None:
            (self.reducer.add if new_bug else self.reducer.hit)(self.out_dir / result.case_dir)
        if new_bug and result.case_dir and self.bisector is not None:
            self.bisector.add(self.out_dir / result.case_dir)
        if unit_done:  # the worker goes on to the next unit it holds, whose messages follow this one
            work.next_unit()
