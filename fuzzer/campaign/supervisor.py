"""Local worker processes: started from a fork server, fed over pipes, watched for death, hangs and memory, and
recycled once they have run enough or grown too large. What they say goes to a Listener (the campaign), and so does
a worker lost mid-unit, with what its fault file holds; nothing here knows what a unit means."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.messages import Message, Ready, Step, Stop, decode, encode
from fuzzer.campaign.scheduler import Unit
from fuzzer.campaign.worker import worker_main
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.support.confine import lower_priority, rss_bytes
from fuzzer.support.errors import UsageError
from fuzzer.support.faults import (
    Fault,
    describe_exit,
    fault_file,
    hang_reason,
    log_file,
    read_fault,
    request_stack_dump,
)
from fuzzer.support.quiet import output_to
from fuzzer.support.scratch import scratch_root, sweep_dead
from oracles.verdict import Symptom

START_TIMEOUT_S = 180.0
# A worker's resident memory creeps up (exporter and runtime caches, allocator fragmentation: 40-80 MB a
# minute seen here); replacing it between units, after so many tests or once it has grown this much since its
# first unit (relative: a CUDA worker starts far larger than a CPU one), keeps memory flat over a long campaign.
# Counted in tests, not graphs: a worker testing one converter does seven times the units of one testing seven.
RECYCLE_AFTER_TESTS = 2100
RECYCLE_GROWTH_MB = 700
CAMPAIGN_NICE = 5  # the campaign process's niceness, at least, while its workers keep theirs (yield_to_workers)
MAX_START_FAILURES = 3
WARM_START = "fuzzer.campaign.warm_start"  # imported by the fork server last: warms the libraries preloaded before it
FORK_SERVER_LOG = "fork-server.log"  # what the libraries print as the fork server preloads them (TensorFlow's notices)
# Deciding whose bug a case is may take this many tests' time before the worker counts as hung: it converts the
# model before the tool, or the graph with each other exporter of its framework (fuzzer/diagnosis/crosscheck.py).
DECIDING_TESTS = 4
HOUSEKEEPING_S = 0.5  # how often the loop checks workers' memory and writes its heartbeat


class CampaignError(UsageError):
    """The campaign cannot go on (workers fail to start): one line for the user."""


class Listener(Protocol):
    """What the supervisor tells the campaign."""

    def handle(self, work: Assignment, msg: Message) -> None: ...

    def lost(self, work: Assignment, symptom: Symptom, reason: str, fault: Fault) -> None: ...

    def released(self, units: Sequence[Unit]) -> None: ...


@dataclass
class Slot:
    """One worker process and what it is doing."""

    proc: Any
    conn: Connection
    started: float
    ready: bool = False
    retiring: bool = False  # due for recycling: it gets no more units, and is replaced once idle
    rss_baseline: int | None = None
    work: Assignment = field(default_factory=Assignment)


class Supervisor:
    """Keeps `workers` processes running `worker` config; `libraries` are imported once in the fork server."""

    def __init__(self, worker: WorkerConfig, log_dir: Path, listener: Listener, mp_context: str = "forkserver",
                 libraries: Sequence[str] = (), show_libraries: bool = False) -> None:
        self.worker = worker
        self.log_dir = log_dir
        self.listener = listener
        self.mp_context = mp_context
        self.ctx = multiprocessing.get_context(mp_context)
        if mp_context == "forkserver":
            self.ctx.set_forkserver_preload(["fuzzer.campaign.worker", *libraries, WARM_START])
            start_fork_server(None if show_libraries else log_dir / FORK_SERVER_LOG)
        self.slots: list[Slot] = []
        self.start_failures = 0
        self.last_memory_check = 0.0

    def start(self, workers: int, yield_cpu: bool) -> None:
        """Start the workers; with `yield_cpu`, then let them have the CPU first (yield_to_workers)."""
        self.slots = [self.spawn() for _ in range(workers)]
        if yield_cpu:
            self.yield_to_workers()

    def yield_to_workers(self) -> None:
        """Let the workers (and their feeders) have the CPU first: this process's bookkeeping, case writing and
        background reduction wait for a free moment. On 2 cores with one worker and its feeder, its ~6% of a core,
        taken at each result, had preempted the worker. The workers come from the fork server, started before, so
        they keep their priority. Only with prepare-ahead: a worker without units queued waits for this process at
        every unit."""
        if self.worker.prepare_ahead and self.mp_context == "forkserver":
            lower_priority(CAMPAIGN_NICE)

    def spawn(self) -> Slot:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=worker_main, args=(child, json.dumps(self.worker.to_json())),
                                daemon=True, name="convsmith-worker")
        proc.start()
        child.close()
        return Slot(proc, parent, time.monotonic())

    def available(self) -> list[Slot]:
        """The workers that take units: started, and not due for recycling."""
        return [slot for slot in self.slots if slot.ready and not slot.retiring]

    def busy(self) -> bool:
        return any(slot.work.busy for slot in self.slots)

    def send(self, slot: Slot, msg: Message) -> None:
        try:
            slot.conn.send_bytes(encode(msg))
        except OSError:  # it died; watch() notices the exit
            pass

    def poll(self, timeout: float) -> None:
        """Wait up to `timeout` for a message or an exit, and pass on every message that came."""
        conns = {s.conn: s for s in self.slots}
        sentinels = {s.proc.sentinel: s for s in self.slots}
        for ready in wait(list(conns) + list(sentinels), timeout=timeout):
            slot = conns.get(ready) or sentinels.get(ready)
            if slot is not None and slot in self.slots:
                self.drain(slot)

    def drain(self, slot: Slot) -> None:
        try:
            while slot.conn.poll():
                for msg in decode(slot.conn.recv_bytes()):  # one message, or a list of them (worker.Outbox)
                    if isinstance(msg, Ready):
                        slot.ready, self.start_failures = True, 0
                    else:
                        self.listener.handle(slot.work, msg)
        except (EOFError, OSError):
            pass

    def watch(self) -> None:
        """Replace dead workers; kill hung or oversized ones; each becomes a verdict for what it was running."""
        now = time.monotonic()
        # The loop turns at every worker message (several per test); reading /proc each time cost the parent
        # CPU the workers need, and a few tenths of a second do not matter to the RSS watchdog.
        check_memory = now - self.last_memory_check >= HOUSEKEEPING_S
        if check_memory:
            self.last_memory_check = now
        for i, slot in enumerate(list(self.slots)):
            if slot.ready and not slot.retiring:
                slot.retiring = due_for_recycling(slot.work, partial(resident_growth, slot)
                                                  if check_memory or not slot.work.busy else None)
            if slot.retiring and not slot.work.busy:
                self.send(slot, Stop())
                slot.proc.join(timeout=5)
                self.kill(slot)
                self.slots[i] = self.spawn()
                continue
            verdict = self.trouble(slot, now, check_memory)
            if verdict is None:
                continue
            if verdict[0] is Symptom.HANG and slot.ready:  # where it hangs, before the kill
                request_stack_dump(slot.proc.pid, fault_file(self.log_dir, slot.proc.pid))
            self.kill(slot)
            if not slot.ready:
                self.start_failed(slot)
            else:
                self.start_failures = 0
                self.listener.lost(slot.work, *verdict, read_fault(self.log_dir, slot.proc.pid))
            self.slots[i] = self.spawn()

    def trouble(self, slot: Slot, now: float, check_memory: bool) -> tuple[Symptom, str] | None:
        """Why the worker must go (it died, hangs or outgrew its memory), or None."""
        unit = slot.work.unit
        timeout_s, memory_mb = self.worker.limits_for(unit.seed if unit else None)
        if not slot.proc.is_alive():
            self.drain(slot)
            return Symptom.PROCESS_DEATH, describe_exit(slot.proc.exitcode)
        if not slot.ready and now - slot.started > START_TIMEOUT_S:
            return Symptom.HANG, "worker did not start"
        return busy_trouble(slot.work, now, timeout_s, memory_mb,
                            partial(resident_growth, slot) if check_memory else None)

    def start_failed(self, slot: Slot) -> None:
        self.start_failures += 1
        if self.start_failures >= MAX_START_FAILURES:
            log = log_file(self.log_dir, slot.proc.pid)
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise CampaignError(f"workers fail to start ({describe_exit(slot.proc.exitcode)}): "
                                f"{tail[0] if tail else 'see ' + str(self.log_dir)}")

    def kill(self, slot: Slot) -> None:
        self.listener.released(slot.work.release())  # not begun: the next worker to be free runs them
        if slot.proc.is_alive():
            slot.proc.kill()
        slot.proc.join(timeout=10)
        slot.conn.close()

    def shutdown(self) -> None:
        for slot in self.slots:
            if not slot.work.busy and slot.proc.is_alive():
                self.send(slot, Stop())
        for slot in self.slots:
            slot.proc.join(timeout=0 if slot.work.busy else 5)
            self.kill(slot)
        sweep_dead(scratch_root(self.log_dir))


def start_fork_server(log: Path | None) -> None:
    """Start this process's fork server with its output in `log` (None: the terminal); its workers keep that output
    until confine() gives them their own logs."""
    from multiprocessing import forkserver

    if log is None:
        forkserver.ensure_running()
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with output_to(log):
        forkserver.ensure_running()


def busy_trouble(work: Assignment, now: float, timeout_s: float, memory_mb: int,
                 growth: Callable[[], int] | None) -> tuple[Symptom, str] | None:
    """Why a busy worker must go, on any engine: its phase ran past the timeout, or it grew (`growth()`, bytes, when
    memory is checked) past its memory; None."""
    limit = timeout_s * (DECIDING_TESTS if work.phase is Step.BLAME else 1)
    if work.busy and work.phase is not None and now - work.phase_start > limit:
        return Symptom.HANG, hang_reason(limit)
    if work.busy and memory_mb > 0 and growth is not None and growth() > memory_mb * 2**20:
        return Symptom.OUT_OF_MEMORY, f"resident memory over {memory_mb} MiB"
    return None


def due_for_recycling(work: Assignment, growth: Callable[[], int] | None) -> bool:
    """A worker that has run enough tests, or (`growth()`, bytes, when memory is checked) grown too large; never a
    fresh one: it must progress."""
    if work.units_done == 0:
        return False
    if work.tests_done >= RECYCLE_AFTER_TESTS:
        return True
    return growth is not None and growth() > RECYCLE_GROWTH_MB * 2**20


def resident_growth(slot: Slot) -> int:
    """Bytes the worker has grown since it was first measured at work (torch and friends loaded by then)."""
    rss = rss_bytes(slot.proc.pid)
    if slot.rss_baseline is None:
        slot.rss_baseline = rss
    return rss - slot.rss_baseline
