"""The campaign loop: N long-lived workers, fed units over pipes, watched for death, hangs and memory.

Seeds are seed_base + unit index. The campaign process is the only database writer: it commits each test
result as it arrives and marks a unit done with its last result, so a campaign killed at any point resumes
without repeating a committed test. It also writes every case folder, from the case a worker sends with the result
that names it (fuzzer/cases/wire.py), so the worker spends no time on files. A worker that segfaults, aborts, hangs
or outgrows its memory becomes a PROCESS_DEATH, HANG or OUT_OF_MEMORY verdict for the converter it was running, and
is replaced.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import multiprocessing
import random
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.novelty import Demotion, Novelty
from fuzzer.campaign.progress import Counts, Progress
from fuzzer.campaign.reduce_queue import ReduceQueue, ReducerConfig
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.settings import setting_detail, settled_options
from fuzzer.campaign.steering import Steering
from fuzzer.campaign.unit_graph import encode
from fuzzer.campaign.worker import WorkerConfig, worker_main
from fuzzer.cases.case import case_id, collect_versions, lost_case, remade_source
from fuzzer.cases.folder import read_case, write_case
from fuzzer.cases.wire import case_from_message
from fuzzer.check.pipeline import CheckOptions
from fuzzer.converters import ConverterRegistry, load_registry
from fuzzer.converters.upstream import EXPORTERS
from fuzzer.support.confine import lower_priority, rss_bytes
from fuzzer.support.errors import UsageError
from fuzzer.support.faults import describe_exit, fault_file, log_file, lost_verdict, read_fault, request_stack_dump
from generators.ir import Graph
from oracles.signature import crash_signature
from oracles.verdict import Stage, Symptom, Verdict

LOG_DIR = ".logs"
# A new campaign runs the TorchScript exporter's own test on this share of graphs where the dynamo exporter runs too:
# three in four exporter tests go to the exporter PyTorch develops (`convsmith fuzz --script-share` sets another).
SCRIPT_SHARE = 1 / 3
START_TIMEOUT_S = 180.0
# A worker's resident memory creeps up (exporter and runtime caches, allocator fragmentation: 40-80 MB a
# minute seen here); replacing it between units, after so many tests or once it has grown this much since its
# first unit (relative: a CUDA worker starts far larger than a CPU one), keeps memory flat over a long campaign.
# Counted in tests, not graphs: a worker testing one converter does seven times the units of one testing seven.
RECYCLE_AFTER_TESTS = 2100
RECYCLE_GROWTH_MB = 700
DEMOTED_META = "demoted_pairs"  # the (operator, dtype) pairs generated less, kept for status and a resume
CAMPAIGN_NICE = 5  # the campaign process's niceness, at least, while its workers keep theirs (yield_to_workers)
NOVELTY_META = "novelty"  # the hits behind them, so that a resumed campaign goes on counting (Novelty.tally)
LOST_SYMPTOMS = frozenset(s.json_name for s in (Symptom.PROCESS_DEATH, Symptom.HANG, Symptom.OUT_OF_MEMORY))
LOST_TIMER = "converter_until_lost"  # a dead or hung worker's test: booked as conversion time
# Units queued behind a worker's current one when it prepares ahead: room for its feeder to get through a slow unit
# (a long input search, a hard graph: 100-270 ms, against 10-40 ms per test at 5 nodes) before the worker runs dry.
# At 5 nodes, waits of over 4 ms summed 3.06 and 2.81 s a minute with 8, 1.11 and 1.06 s with 16 (alternating
# 1-minute runs); a worker's death loses what its feeder holds, which those runs include.
AHEAD_UNITS = 16
MAX_START_FAILURES = 3
WARM_START = "fuzzer.campaign.warm_start"  # imported by the fork server last: warms the libraries preloaded before it
HOUSEKEEPING_S = 0.5  # how often the loop checks workers' memory and writes its heartbeat


class CampaignError(UsageError):
    """The campaign cannot go on (workers fail to start): one line for the user."""


@dataclass(frozen=True)
class CampaignSpec:
    """What a campaign is, recorded in its database so a resume continues the same campaign."""

    seed_base: int
    converters: tuple[str, ...]
    worker: WorkerConfig
    max_tests: int | None = None  # units (graphs) over the whole campaign; None: until time or Ctrl-C
    # Where both exporters run, the share of graphs the TorchScript exporter's own test runs on (PyTorch keeps it in
    # maintenance; the dynamo exporter is its default): 1 in campaigns recorded before the split.
    script_share: float = 1.0

    def to_json(self) -> dict[str, Any]:
        worker = {k: v for k, v in self.worker.to_json().items() if k not in ("out_dir", "log_dir")}
        return {"seed_base": self.seed_base, "converters": list(self.converters), "worker": worker,
                "max_tests": self.max_tests, "script_share": self.script_share}

    @classmethod
    def from_json(cls, data: dict[str, Any], out_dir: Path) -> CampaignSpec:
        worker = dict(data["worker"], out_dir=str(out_dir), log_dir=str(out_dir / LOG_DIR))
        return cls(int(data["seed_base"]), tuple(data["converters"]), WorkerConfig.from_json(worker),
                   data.get("max_tests"), float(data.get("script_share", 1.0)))

    def converters_for(self, seed: int) -> list[str]:
        """The converters the graph of `seed` is tested with: every one, but where both exporters run, the
        TorchScript exporter's own test on `script_share` of the graphs (drawn by the seed alone)."""
        script = EXPORTERS[0]
        if not set(EXPORTERS) <= set(self.converters) or random.Random(f"script:{seed}").random() < self.script_share:
            return list(self.converters)
        return [c for c in self.converters if c != script]


@dataclass
class Unit:
    idx: int
    seed: int
    remaining: list[str]


@dataclass
class Slot:
    """One worker process and what it is doing."""

    proc: Any
    conn: Connection
    started: float
    ready: bool = False
    unit: Unit | None = None
    # Units sent after `unit`, which the worker runs next (its feeder prepares them meanwhile), in order.
    ahead: collections.deque[Unit] = field(default_factory=collections.deque)
    converter: str | None = None
    phase: str | None = None  # "sent" (the current unit, generated or waited for), "convert" or "case"
    phase_start: float = 0.0
    graph: dict[str, Any] | None = None
    nodes: int | None = None
    pairs: list[tuple[str, str]] = field(default_factory=list)  # the graph's (operator, dtype) pairs
    units_done: int = 0
    tests_done: int = 0
    retiring: bool = False  # due for recycling: it gets no more units, and is replaced once idle
    rss_baseline: int | None = None
    demoted: list[Demotion] = field(default_factory=list)  # the demotions last sent to the worker

    @property
    def busy(self) -> bool:
        return self.unit is not None


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
    counts: Counts = field(default_factory=Counts)
    reduce_budget_s: float | None = None  # minimize each new bug case in the background; None: don't
    # Lower this process's priority (and its reducer's) below the workers' once they are forked, where they hold units
    # queued ahead (prepare-ahead), so that its latency never stalls one (see yield_to_workers).
    yield_cpu: bool = False

    def __post_init__(self) -> None:
        self.registry = self.registry or load_registry(self.spec.worker.registry)
        self.ctx = multiprocessing.get_context(self.mp_context)
        if self.mp_context == "forkserver":
            self.ctx.set_forkserver_preload(["fuzzer.campaign.worker", *self.preloaded_libraries(), WARM_START])
        self.slots: list[Slot] = []
        # What the campaign has hit often: generated less when spec.worker.demote_known.
        self.novelty = Novelty.from_tally(self.db.get_meta(NOVELTY_META), self.db.get_meta(DEMOTED_META) or ())
        # The ONNX tools' rewrites seen to fire: their patterns are drawn more often until they have (steering.py).
        self.steering = Steering.from_db(self.db)
        self._in_force: tuple[tuple[list[Demotion], list[Demotion]], list[Demotion]] | None = None
        self.queue: collections.deque[Unit] = collections.deque()
        self.stopping = False
        self.start_failures = 0
        self.last_memory_check = self.last_beat = 0.0
        self.log_dir = self.out_dir / LOG_DIR
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.counts = Counts.from_db(self.db)
        self.reducer: ReduceQueue | None = None
        if self.reduce_budget_s is not None:
            worker = self.spec.worker
            config = ReducerConfig(self.reduce_budget_s, worker.registry, worker.timeout_s, worker.memory_mb)
            self.reducer = ReduceQueue(self.log_dir, config)
            self.reducer.requeue(case_folders(self.out_dir))

    # ---- the loop -----------------------------------------------------------------------------------------

    def run(self) -> str:
        """'finished' (budget spent or all done), 'time' (time budget) or 'interrupted' (Ctrl-C)."""
        self.session = self.db.start_session(self.workers)
        self.adopt_orphans()
        self.queue.extend(Unit(i, s, [c for c in r if c in self.spec.converters_for(s)])
                          for i, s, r in self.db.unfinished(self.spec.converters))
        deadline = None if self.time_s is None else time.monotonic() + self.time_s
        status = "finished"
        try:
            self.slots = [self.spawn() for _ in range(self.workers)]
            self.yield_to_workers()
            grace_end = None
            while True:
                now = time.monotonic()
                if deadline is not None and now + self.reserve_s() >= deadline and not self.stopping:
                    self.stopping, status = True, "time"
                    grace_end = now + min(self.spec.worker.timeout_s, 30.0)
                self.dispatch()
                if not any(s.busy for s in self.slots) and (self.stopping or not self.more_work()):
                    break
                if grace_end is not None and now > grace_end:
                    break  # in-flight units stay unfinished: a resume completes them
                self.poll(0.2)
                self.watch()
                if self.reducer is not None:
                    self.reducer.step(1)
                if time.monotonic() - self.last_beat >= HOUSEKEEPING_S:
                    self.db.beat(self.session)
                    self.last_beat = time.monotonic()
                if self.progress is not None:
                    self.progress.update(self.counts)
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            self.shutdown()
            self.db.end_session(self.session, status)
            self.db.set_meta(DEMOTED_META, self.novelty.demoted())
            self.db.set_meta(NOVELTY_META, self.novelty.tally())
            self.finish_reductions(status)
            if self.progress is not None:
                self.progress.close(self.counts)
        return status

    def preloaded_libraries(self) -> list[str]:
        """The campaign's converters' libraries, imported once in the fork server rather than in every worker: a
        worker started after a crash then converts at once (importing torch.onnx on its first test took ~90 ms)."""
        assert self.registry is not None
        converters = [self.registry[name] for name in self.spec.converters if name in self.registry]
        return list(dict.fromkeys(lib for conv in converters if conv.availability()[0] for lib in conv.libraries))

    def reserve_s(self) -> float:
        """Time kept back from the tests so that every case found is reduced before the budget ends."""
        return 0.0 if self.reducer is None else self.reducer.reserve_s(self.workers)

    def finish_reductions(self, status: str) -> None:
        """A campaign that ended its tests reduces every waiting case, one reducer per worker; Ctrl-C stops them
        (what is left is reduced on resume)."""
        if self.reducer is None:
            return
        try:
            if status == "interrupted":
                self.reducer.close(wait_s=0)
            else:
                self.reducer.drain(self.workers)
        except KeyboardInterrupt:
            self.reducer.close(wait_s=0)

    def more_work(self) -> bool:
        return bool(self.queue) or self.spec.max_tests is None or self.db.next_index() < self.spec.max_tests

    def next_unit(self) -> Unit | None:
        while self.queue:
            unit = self.queue.popleft()
            if unit.remaining:
                return unit
        if self.spec.max_tests is not None and self.db.next_index() >= self.spec.max_tests:
            return None
        idx = self.db.next_index()
        seed = self.spec.seed_base + idx
        self.db.add_unit(idx, seed)
        return Unit(idx, seed, self.spec.converters_for(seed))

    def dispatch(self) -> None:
        """Give each idle worker a unit and, with feeders, keep AHEAD_UNITS more queued behind its current one (a
        worker due for recycling gets none, so that it comes to rest)."""
        if self.stopping:
            return
        for slot in self.slots:
            if not slot.ready or slot.retiring:
                continue
            if not slot.busy:
                unit = self.next_unit()
                if unit is None:
                    return
                self.send_unit(slot, unit)
                slot.unit, slot.graph, slot.nodes, slot.pairs = unit, None, None, []
                slot.phase, slot.converter, slot.phase_start = "sent", None, time.monotonic()
            while self.spec.worker.prepare_ahead and len(slot.ahead) < AHEAD_UNITS:
                unit = self.next_unit()
                if unit is None:
                    return
                self.send_unit(slot, unit)
                slot.ahead.append(unit)

    def send_unit(self, slot: Slot, unit: Unit) -> None:
        """Send `unit`, after the demotions in force when they changed since the last unit (worker.Inbox)."""
        demoted = self.demotions_in_force()
        if demoted is not slot.demoted and demoted != slot.demoted:
            self.send(slot, {"type": "demoted", "demoted": demoted})
            slot.demoted = demoted
        self.send(slot, {"type": "unit", "idx": unit.idx, "seed": unit.seed, "converters": unit.remaining})

    def demotions_in_force(self) -> list[Demotion]:
        """What units are sent with, where the campaign spends its budget on what is new (demote_known): the
        demotions of known bugs and the boosts of rewrites not yet seen to fire; the same list while neither
        changes, so that a worker is told only of a change."""
        if not self.spec.worker.demote_known:
            return []
        parts = (self.novelty.demotions(), self.steering.boosts(self.spec.converters))
        if self._in_force is None or any(a is not b for a, b in zip(parts, self._in_force[0], strict=True)):
            self._in_force = (parts, parts[0] + parts[1])
        return self._in_force[1]

    def send(self, slot: Slot, msg: dict[str, Any]) -> None:
        try:
            slot.conn.send_bytes(encode(msg))
        except OSError:  # it died; watch() notices the exit
            pass

    def poll(self, timeout: float) -> None:
        conns = {s.conn: s for s in self.slots}
        sentinels = {s.proc.sentinel: s for s in self.slots}
        for ready in wait(list(conns) + list(sentinels), timeout=timeout):
            slot = conns.get(ready) or sentinels.get(ready)
            if slot is not None and slot in self.slots:
                self.drain(slot)

    def drain(self, slot: Slot) -> None:
        try:
            while slot.conn.poll():
                frame = json.loads(slot.conn.recv_bytes())  # one message, or a list of them (worker.Outbox)
                for msg in frame if isinstance(frame, list) else (frame,):
                    self.handle(slot, msg)
        except (EOFError, OSError):
            pass

    # ---- worker lifecycle ---------------------------------------------------------------------------------

    def yield_to_workers(self) -> None:
        """Let the workers (and their feeders) have the CPU first: this process's bookkeeping, case writing and
        background reduction wait for a free moment. On 2 cores with one worker and its feeder, its ~6% of a core,
        taken at each result, had preempted the worker; niced, 1.4 points less of a five-node campaign's loop went
        outside the converter (14.7% against 16.1%, four runs each; at ten nodes 0.3 points). The workers come from
        the fork server, started before, so they keep their priority. Only with prepare-ahead: a worker without units
        queued waits for this process at every unit."""
        if self.yield_cpu and self.spec.worker.prepare_ahead and self.mp_context == "forkserver":
            lower_priority(CAMPAIGN_NICE)

    def spawn(self) -> Slot:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=worker_main, args=(child, json.dumps(self.spec.worker.to_json())),
                                daemon=True, name="convsmith-worker")
        proc.start()
        child.close()
        return Slot(proc, parent, time.monotonic())

    def watch(self) -> None:
        """Replace dead workers; kill hung or oversized ones; each becomes a verdict for what it was running."""
        now = time.monotonic()
        limit = self.spec.worker.memory_mb * 2**20 if self.spec.worker.memory_mb > 0 else None
        # The loop turns at every worker message (several per test); reading /proc each time cost the parent
        # CPU the workers need, and a few tenths of a second do not matter to the RSS watchdog.
        check_memory = now - self.last_memory_check >= HOUSEKEEPING_S
        if check_memory:
            self.last_memory_check = now
        for i, slot in enumerate(list(self.slots)):
            if slot.ready and not slot.retiring:
                slot.retiring = self.due_for_recycling(slot, check_memory or not slot.busy)
            if slot.retiring and not slot.busy:
                self.send(slot, {"type": "stop"})
                slot.proc.join(timeout=5)
                self.kill(slot)
                self.slots[i] = self.spawn()
                continue
            verdict: tuple[Symptom, str] | None = None
            if not slot.proc.is_alive():
                self.drain(slot)
                verdict = (Symptom.PROCESS_DEATH, describe_exit(slot.proc.exitcode))
            elif not slot.ready and now - slot.started > START_TIMEOUT_S:
                verdict = (Symptom.HANG, "worker did not start")
            elif slot.busy and slot.phase in ("sent", "convert", "case") and \
                    now - slot.phase_start > self.spec.worker.timeout_s:
                verdict = (Symptom.HANG, f"no result after {self.spec.worker.timeout_s:g} s")
            elif slot.busy and limit is not None and check_memory and resident_growth(slot) > limit:
                verdict = (Symptom.OUT_OF_MEMORY, f"resident memory over {self.spec.worker.memory_mb} MiB")
            if verdict is None:
                continue
            if verdict[0] is Symptom.HANG and slot.ready:  # where it hangs, before the kill
                request_stack_dump(slot.proc.pid, fault_file(self.log_dir, slot.proc.pid))
            self.kill(slot)
            if not slot.ready:
                self.start_failed(slot)
            else:
                self.start_failures = 0
                self.lost(slot, *verdict)
            self.slots[i] = self.spawn()

    @staticmethod
    def due_for_recycling(slot: Slot, check_memory: bool) -> bool:
        """A worker that has run enough tests, or (when `check_memory`) grown too large; never a fresh one: it must
        progress."""
        if slot.units_done == 0:
            return False
        if slot.tests_done >= RECYCLE_AFTER_TESTS:
            return True
        return check_memory and resident_growth(slot) > RECYCLE_GROWTH_MB * 2**20

    def start_failed(self, slot: Slot) -> None:
        self.start_failures += 1
        if self.start_failures >= MAX_START_FAILURES:
            log = log_file(self.log_dir, slot.proc.pid)
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise CampaignError(f"workers fail to start ({describe_exit(slot.proc.exitcode)}): "
                                f"{tail[0] if tail else 'see ' + str(self.log_dir)}")

    def kill(self, slot: Slot) -> None:
        self.queue.extendleft(reversed(slot.ahead))  # not begun: the next worker to be free runs them
        slot.ahead.clear()
        if slot.proc.is_alive():
            slot.proc.kill()
        slot.proc.join(timeout=10)
        slot.conn.close()

    def shutdown(self) -> None:
        for slot in self.slots:
            if not slot.busy and slot.proc.is_alive():
                self.send(slot, {"type": "stop"})
        for slot in self.slots:
            slot.proc.join(timeout=0 if slot.busy else 5)
            self.kill(slot)

    # ---- messages -----------------------------------------------------------------------------------------

    def handle(self, slot: Slot, msg: dict[str, Any]) -> None:
        kind = msg["type"]
        if kind == "ready":
            slot.ready, self.start_failures = True, 0
        elif kind == "phase":
            slot.phase, slot.converter, slot.phase_start = msg["phase"], msg["converter"], time.monotonic()
        elif kind == "graph":
            slot.graph, slot.nodes, slot.pairs = msg["graph"], msg["nodes"], msg.get("pairs", [])
            self.db.set_unit_sequences(msg["idx"], msg["sequences"])  # the worker has the graph parsed already
        elif kind == "prepared":
            self.db.set_unit_info(msg["idx"], slot.nodes, msg["timings"], msg.get("values"))
        elif kind == "own_error":
            self.own_error(msg)
        elif kind == "unit_failed" and slot.unit is not None:
            self.db.set_unit_info(msg["idx"], slot.nodes, msg["timings"])
            for name in list(slot.unit.remaining):
                self.commit(slot, TestResult.own_error(slot.unit.idx, slot.unit.seed, name))
        elif kind == "case" and slot.unit is not None:
            self.write_sent_case(slot.unit, msg)
        elif kind == "result" and slot.unit is not None:
            result = TestResult.from_message(msg)
            if result.case_dir is not None and not (self.out_dir / result.case_dir).is_dir():
                result = dataclasses.replace(result, case_dir=None)  # its case could not be written
            self.commit(slot, result)

    def write_sent_case(self, unit: Unit, msg: dict[str, Any]) -> None:
        """Write the case folder a worker sent for `unit` (one already there is kept); a failure is our own error."""
        try:
            case = case_from_message(msg)
            write_case(self.out_dir, case, converter=self.registry.get(case.converter))
        except Exception:
            self.own_error({"idx": unit.idx, "seed": unit.seed, "converter": msg.get("case", {}).get("converter"),
                            "phase": "case", "exc_type": "case", "message": "writing a case a worker sent failed",
                            "traceback": traceback.format_exc()})

    def own_error(self, msg: dict[str, Any]) -> None:
        self.db.record_error(msg.get("idx"), msg.get("seed"), msg.get("converter"), msg["phase"], msg["exc_type"],
                             msg["message"], msg["traceback"])
        with open(self.log_dir / "own_errors.log", "a") as handle:
            handle.write(f"--- seed {msg.get('seed')} converter {msg.get('converter')} phase {msg['phase']}\n"
                         f"{msg['traceback']}\n")
        self.counts.own_errors += 1

    def commit(self, slot: Slot, result: TestResult) -> None:
        """Record one test of the slot's unit (once); a new bug's case folder joins the reduce queue."""
        unit = slot.unit
        assert unit is not None
        if result.converter not in unit.remaining:
            return
        unit.remaining.remove(result.converter)
        slot.tests_done += 1
        new_bug = self.db.record_test(result, self.session, not unit.remaining)
        self.steering.record(result.converter, result.rewrites)
        if result.is_bug and result.signature:
            self.novelty.record(result.signature, slot.pairs, result.symptom in LOST_SYMPTOMS)
            detail = setting_detail(result.converter, result.message)
            if detail is not None:
                self.novelty.record_setting(detail)
        self.counts.add(result.symptom, new_bug)
        if new_bug and result.case_dir and self.reducer is not None:
            self.reducer.add(self.out_dir / result.case_dir)
        if not unit.remaining:  # the worker goes on to the next unit it holds, whose messages follow this one
            slot.unit, slot.phase, slot.converter = None, None, None
            slot.units_done += 1
            if slot.ahead:
                slot.unit, slot.graph, slot.nodes, slot.pairs = slot.ahead.popleft(), None, None, []
                slot.phase, slot.phase_start = "sent", time.monotonic()

    def lost(self, slot: Slot, symptom: Symptom, reason: str) -> None:
        """The worker died or was killed mid-unit: a verdict for what it ran; the rest of the unit is requeued."""
        unit = slot.unit
        if unit is None:
            return
        fault = read_fault(self.log_dir, slot.proc.pid)
        frame, dump = fault.frame, fault.dump
        name = slot.converter
        if slot.phase in ("convert", "case") and name is not None and name in unit.remaining:
            if slot.phase == "case":  # our own case writer died: not the converter's
                self.own_error({"idx": unit.idx, "seed": unit.seed, "converter": name, "phase": "case",
                                "exc_type": symptom.json_name, "message": reason, "traceback": dump})
                self.commit(slot, TestResult.own_error(unit.idx, unit.seed, name))
            else:
                verdict = lost_verdict(name, symptom, reason, fault)
                graph = Graph.from_json(slot.graph) if slot.graph is not None else None
                options, _ = settled_options(self.registry[name], self.spec.worker.options_for(
                    self.registry[name], unit.seed, graph), graph, unit.seed, slot.demoted)
                # A death in the upstream export is the exporter's bug, filed under the exporter's own test.
                case_dir = self.write_lost_case(unit, verdict, dump, graph, options) if verdict.is_bug else None
                # The worker was in the converter from the test's start to its death (or the hang's kill).
                spent = max(time.monotonic() - slot.phase_start, 0.0)
                self.commit(slot, TestResult.of_verdict(unit.idx, unit.seed, verdict, options, {LOST_TIMER: spent},
                                                        spent, case_dir))
        else:  # generation, materialization or the eager source: never a converter's bug
            self.own_error({"idx": unit.idx, "seed": unit.seed, "converter": None, "phase": "generate",
                            "exc_type": symptom.json_name, "message": reason, "traceback": dump})
            for conv in list(unit.remaining):
                signature = crash_signature("source", Stage.SOURCE, symptom.name, reason, frame)
                verdict = Verdict(symptom, Stage.SOURCE, conv, signature=signature, message=reason)
                self.commit(slot, TestResult.of_verdict(unit.idx, unit.seed, verdict))
        if slot.unit is not None and slot.unit.remaining:
            self.queue.appendleft(slot.unit)
        slot.unit = None

    def write_lost_case(self, unit: Unit, verdict: Verdict, dump: str, graph: Graph | None,
                        options: dict[str, Any]) -> str | None:
        """The case folder of a test whose worker died (no tensors survive it); a failure to write one is our own
        error, logged and counted, never the end of the campaign."""
        name = case_id(verdict.signature)
        if (self.out_dir / name).exists() or graph is None:
            return name if (self.out_dir / name).exists() else None
        try:
            converter = self.registry[verdict.converter]
            worker = self.spec.worker
            values = worker.values_for(unit.seed).value
            source = remade_source(graph, unit.seed, options, worker.device, values,
                                   CheckOptions(**worker.check).input_budget_s)
            case = lost_case(graph, unit.seed, verdict.converter, options, verdict,
                             collect_versions(converter.distributions), dump, device=worker.device, values=values,
                             source=source)
            return write_case(self.out_dir, case, converter=converter).name
        except Exception:  # our code: keep fuzzing, keep the traceback
            self.own_error({"idx": unit.idx, "seed": unit.seed, "converter": verdict.converter, "phase": "case",
                            "exc_type": "case", "message": "writing the case of a lost worker failed",
                            "traceback": traceback.format_exc()})
            return None

    def adopt_orphans(self) -> None:
        """Case folders written by a test that was killed before its commit: keep them as bugs seen 0 times."""
        known = self.db.bug_signatures()
        for folder in sorted(case_folders(self.out_dir)):
            case = read_case(folder)
            if case.signature not in known:
                self.db.adopt_bug(case.signature, case.verdict.symptom.json_name, case.verdict.stage.value,
                                  case.converter, case.seed, folder.name)


def case_folders(out_dir: Path) -> list[Path]:
    return [p for p in Path(out_dir).iterdir() if p.is_dir() and not p.name.startswith(".")
            and (p / "case.json").exists()]


def resident_growth(slot: Slot) -> int:
    """Bytes the worker has grown since it was first measured at work (torch and friends loaded by then)."""
    rss = rss_bytes(slot.proc.pid)
    if slot.rss_baseline is None:
        slot.rss_baseline = rss
    return rss - slot.rss_baseline
