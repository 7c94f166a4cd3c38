"""The Ray engine: the Supervisor's job (start workers, carry messages, replace the lost) done with Ray actors,
so that a campaign's workers run on every node of a Ray cluster. The only module that imports Ray.

The campaign is unchanged: the same Scheduler, Recorder, messages and verdicts. Each actor hosts one confined
worker process (ray_engine_host.py) and carries its frames; the driver (this process) owns the database and the
case folders. A worker that dies, hangs past the timeout or outgrows its memory is the same verdict as on one box,
and is replaced on its node. An actor lost with its node is not a verdict: its unit's tests not yet recorded and
the units queued behind it go back to the scheduler, and a fresh actor is placed wherever Ray finds room.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.messages import Message, Ready, Stop, decode, encode
from fuzzer.campaign.ray_engine_host import Report, WorkerHost
from fuzzer.campaign.supervisor import (
    MAX_START_FAILURES,
    CampaignError,
    Listener,
    busy_trouble,
    due_for_recycling,
)
from fuzzer.campaign.worker_config import WorkerConfig
from oracles.verdict import Symptom

PUMP_WAIT_S = 0.2  # how long an actor waits for its worker's frames before it answers (messages queue meanwhile)
ENGINE_LOG = "ray_engine.log"


class NodeNamingHost(WorkerHost):
    """A WorkerHost that also names its Ray node: on a cluster of one machine every node has the same host name."""

    def node(self) -> str:
        return f"{super().node()} on Ray node {ray.get_runtime_context().get_node_id()[:8]}"


RemoteHost = ray.remote(NodeNamingHost)


@dataclass
class RemoteSlot:
    """One actor, its worker's state as its frames tell, and the frames waiting for the next pump."""

    host: Any
    starting: Any  # the ref of the actor's start; None once it answered
    pending: Any = None  # the ref of the pump in flight
    outgoing: list[bytes] = field(default_factory=list)
    ready: bool = False
    retiring: bool = False
    rss: int = 0
    rss_baseline: int | None = None
    where: str = ""
    work: Assignment = field(default_factory=Assignment)


class RayEngine:
    """Keeps `workers` Ray actors running `worker` config; `address` is a running cluster's (None: start one here)."""

    def __init__(self, worker: WorkerConfig, log_dir: Path, listener: Listener, libraries: Sequence[str] = (),
                 address: str | None = None) -> None:
        self.worker = worker
        self.log_dir = log_dir
        self.listener = listener
        self.libraries = list(libraries)
        self.owns_ray = not ray.is_initialized()
        if self.owns_ray:
            ray.init(address=address, log_to_driver=False, logging_level="WARNING", configure_logging=False)
        self.slots: list[RemoteSlot] = []
        self.start_failures = 0

    def log(self, line: str) -> None:
        with open(self.log_dir / ENGINE_LOG, "a") as handle:
            handle.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    def start(self, workers: int, yield_cpu: bool) -> None:
        """Start the actors (`yield_cpu` is the local engine's: the workers here are on other processes' nodes)."""
        self.slots = [self.spawn() for _ in range(workers)]

    def spawn(self) -> RemoteSlot:
        # SPREAD: one worker per node first, so that a lost node loses as few as it can.
        host = RemoteHost.options(num_cpus=1, max_restarts=0, scheduling_strategy="SPREAD").remote(
            json.dumps(self.worker.to_json()), self.libraries, list(sys.path))
        return RemoteSlot(host, host.node.remote())

    def available(self) -> list[RemoteSlot]:
        return [slot for slot in self.slots if slot.ready and not slot.retiring]

    def busy(self) -> bool:
        return any(slot.work.busy for slot in self.slots)

    def send(self, slot: RemoteSlot, msg: Message) -> None:
        slot.outgoing.append(encode(msg))

    # ---- the frames -------------------------------------------------------------------------------------

    def poll(self, timeout: float) -> None:
        """Pump every started actor, wait up to `timeout` for one to answer, and handle all that did."""
        for slot in self.slots:
            if slot.starting is None and slot.pending is None:
                slot.pending = slot.host.pump.remote(slot.outgoing, PUMP_WAIT_S)
                slot.outgoing = []
        refs = {ref: slot for slot in self.slots for ref in (slot.starting, slot.pending) if ref is not None}
        if not refs:
            return
        done, rest = ray.wait(list(refs), num_returns=1, timeout=timeout)
        if done and rest:
            done += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        for ref in done:
            slot = refs[ref]
            if slot in self.slots:
                self.answered(slot, ref)

    def answered(self, slot: RemoteSlot, ref: Any) -> None:
        try:
            value = ray.get(ref)
        except RayActorError as exc:
            if ref is slot.starting:  # it never started (its node died, or the worker cannot be set up there)
                self.start_failures += 1
                if self.start_failures >= MAX_START_FAILURES:
                    raise CampaignError(f"Ray actors fail to start: {str(exc).strip().splitlines()[-1]}") from exc
                self.log(f"actor failed to start ({type(exc).__name__}); starting another")
                self.slots[self.slots.index(slot)] = self.spawn()
                return
            self.host_lost(slot, exc)
            return
        if ref is slot.starting:
            slot.starting, slot.where = None, value
            self.log(f"actor started on {value}")
            return
        slot.pending = None
        self.take(slot, value)

    def take(self, slot: RemoteSlot, report: Report) -> None:
        for data in report.frames:
            for msg in decode(data):
                if isinstance(msg, Ready):
                    slot.ready, self.start_failures = True, 0
                else:
                    self.listener.handle(slot.work, msg)
        slot.rss = report.rss
        if report.died is not None:
            self.log(f"worker {report.pid} on {slot.where} died: {report.died}")
            self.worker_gone(slot, (Symptom.PROCESS_DEATH, report.died), report.fault)

    def worker_gone(self, slot: RemoteSlot, verdict: tuple[Symptom, str], fault: Any) -> None:
        """The actor's worker died or was killed and a fresh one started: a verdict for what it ran."""
        self.listener.released(slot.work.release())
        work, was_ready = slot.work, slot.ready
        self.fresh_worker(slot)
        if not was_ready:
            self.start_failures += 1
            if self.start_failures >= MAX_START_FAILURES:
                raise CampaignError(f"workers fail to start on {slot.where} ({verdict[1]}): see its Ray logs")
            return
        self.start_failures = 0
        self.listener.lost(work, *verdict, fault)

    def fresh_worker(self, slot: RemoteSlot) -> None:
        """The actor runs a new worker: it must say it is ready, and has run nothing, been told no demotions."""
        slot.work, slot.ready, slot.retiring, slot.rss, slot.rss_baseline = Assignment(), False, False, 0, None

    def host_lost(self, slot: RemoteSlot, exc: BaseException) -> None:
        """The actor is gone (its node lost): nothing it ran is a verdict; its units run again elsewhere."""
        units = ([slot.work.unit] if slot.work.unit is not None else []) + slot.work.release()
        slot.work.unit = None
        self.log(f"actor on {slot.where or 'an unknown node'} lost ({type(exc).__name__}); units "
                 f"{[u.idx for u in units]} rescheduled")
        self.listener.released(units)
        self.slots[self.slots.index(slot)] = self.spawn()

    # ---- troubles ---------------------------------------------------------------------------------------

    def watch(self) -> None:
        """Kill hung or oversized workers (a verdict each) and recycle the worn; the dead were told by poll."""
        now = time.monotonic()
        for slot in list(self.slots):
            if not slot.ready or slot not in self.slots:
                continue
            if not slot.retiring:
                slot.retiring = due_for_recycling(slot.work, partial(self.growth, slot))
            verdict = self.trouble(slot, now)
            if verdict is not None:
                self.settle(slot)  # the frames of the pump in flight first: the test may have ended meanwhile
                verdict = self.trouble(slot, time.monotonic()) if slot in self.slots and slot.ready else None
            if verdict is not None:
                self.replace_worker(slot, verdict)
            elif slot.retiring and not slot.work.busy:
                self.replace_worker(slot, None)

    def trouble(self, slot: RemoteSlot, now: float) -> tuple[Symptom, str] | None:
        unit = slot.work.unit
        return busy_trouble(slot.work, now, *self.worker.limits_for(unit.seed if unit else None),
                            partial(self.growth, slot))

    def growth(self, slot: RemoteSlot) -> int:
        if slot.rss and slot.rss_baseline is None:
            slot.rss_baseline = slot.rss
        return slot.rss - (slot.rss_baseline or slot.rss)

    def settle(self, slot: RemoteSlot) -> None:
        if slot.pending is not None:
            self.answered(slot, slot.pending)

    def replace_worker(self, slot: RemoteSlot, verdict: tuple[Symptom, str] | None) -> None:
        """A fresh worker in the actor; for a `verdict` (hang, memory) the old one's test is recorded as such."""
        try:
            fault, pid = ray.get(slot.host.replace_worker.remote(verdict is not None and verdict[0] is Symptom.HANG))
        except RayActorError as exc:
            self.host_lost(slot, exc)
            return
        if verdict is None:
            self.log(f"worker on {slot.where} recycled; new worker {pid}")
            self.listener.released(slot.work.release())
            self.fresh_worker(slot)
            return
        self.log(f"worker on {slot.where} killed: {verdict[1]}; new worker {pid}")
        self.worker_gone(slot, verdict, fault)

    def shutdown(self) -> None:
        """Stop the idle workers, kill the busy ones, and end the actors (and the Ray session this engine began)."""
        for slot in list(self.slots):
            if slot.starting is None:
                self.settle(slot)
        started = [slot for slot in self.slots if slot.starting is None]
        for slot in started:
            if not slot.work.busy:
                slot.host.pump.remote([encode(Stop())], 0)
        stops = [slot.host.stop.remote(0 if slot.work.busy else 5) for slot in started]
        ray.wait(stops, num_returns=len(stops), timeout=15)
        for slot in self.slots:
            self.listener.released(slot.work.release())
            ray.kill(slot.host)
        if self.owns_ray:
            ray.shutdown()
