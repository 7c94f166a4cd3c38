"""The worker process: a long-lived loop that runs test units sent over a pipe and reports each result.

A unit is (index, seed, converters, demoted pairs): generate the graph of the seed, materialize it and find inputs
once, then check it with each converter in turn, reporting a "phase" message before each step so the campaign knows
what was running when a process dies or hangs. A unit is a pure function of (seed, config, the (operator, dtype)
pairs the campaign demoted when it sent the unit): nothing else is read. The campaign queues units ahead of the
one running, so a worker never waits for the campaign, and its feeder (ahead.py) prepares them meanwhile.

Messages are the typed ones of fuzzer/campaign/messages.py, framed by the Inbox and Outbox (mailbox.py).
The worker ignores SIGINT (the campaign handles Ctrl-C), dies with its parent (PR_SET_PDEATHSIG), runs torch
single-threaded, limits its address space (RLIMIT_AS) and leaves fatal-signal tracebacks in a faulthandler file the
campaign reads, and a hang's when the campaign asks for them before the kill (fuzzer/support/faults.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fuzzer.campaign.ahead import Feeder
from fuzzer.campaign.mailbox import Collected, Inbox, Outbox, Post
from fuzzer.campaign.messages import (
    CaseSent,
    OwnError,
    PhaseStarted,
    Ready,
    RunUnit,
    Step,
    UnitFailed,
    UnitPrepared,
)
from fuzzer.campaign.policy.class_steering import steered_key
from fuzzer.campaign.policy.culprit_cut import (
    CULPRIT_CUT,
    CULPRIT_GUESSED,
    CUT_ROUNDS,
    CUT_TIMER,
    culprit_operator,
    known_culprits,
    reduced_culprit,
    without_culprit,
)
from fuzzer.campaign.policy.decide import decide
from fuzzer.campaign.policy.novelty import Demotion
from fuzzer.campaign.policy.traits import trait_detail
from fuzzer.campaign.progress import BLAME_TIMER
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.sources import SourceKind
from fuzzer.campaign.unit_graph import graph_message
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.campaign.zoo_unit import run_zoo_unit
from fuzzer.cases.case import CaseData, case_from_result, case_id, case_log, collect_versions
from fuzzer.cases.wire import case_message
from fuzzer.check.pipeline import CheckOptions, CheckResult, check_prepared, prepare
from fuzzer.check.result import Prepared, add_timings, book_inner
from fuzzer.converters import ConverterRegistry, load_registry
from fuzzer.converters.base import Converter
from fuzzer.diagnosis.whose_bug import with_blame
from fuzzer.support.confine import confine
from generators.generator import generate
from generators.ir import Graph
from oracles.taxonomy import memory_verdict
from oracles.verdict import Stage, Symptom, Verdict


def setup_process(config: WorkerConfig) -> Any:
    """Confine this worker (fuzzer/support/confine.py) under its config's limits; returns the fault file."""
    return confine(config.address_space_mb, config.device, config.log_dir)


# ---- the loop ---------------------------------------------------------------------------------------------

def worker_main(conn: Connection, config_json: str) -> None:
    """Entry point of a worker process: set up, say ready, run units until told to stop or the pipe closes."""
    config = WorkerConfig.from_json(json.loads(config_json))
    setup_process(config)  # faulthandler holds its fault file open
    feeder = None
    if config.prepare_ahead and config.device == "cpu":  # forked now, while this process has one thread
        feeder = Feeder(config, CheckOptions(**config.check).input_budget_s)
    registry = load_registry(config.registry)
    outbox = Outbox(conn.send_bytes)
    runner = UnitRunner(config, registry, outbox, feeder)
    outbox.send(Ready(os.getpid()))
    inbox = Inbox(conn)
    pending = inbox.pending
    while True:
        try:
            while not pending:
                outbox.flush()  # the last result, held, must not wait for the campaign's next unit
                inbox.receive()
            while conn.poll(0):  # units the campaign queued behind this one
                inbox.receive()
        except (EOFError, OSError):
            return
        msg = pending.popleft()
        if not isinstance(msg, RunUnit):
            outbox.flush()
            return
        runner.expect([(unit.idx, unit.seed, unit.demoted) for unit in (msg, *pending) if isinstance(unit, RunUnit)])
        try:
            runner.run_unit(msg.idx, msg.seed, msg.converters, msg.demoted)
        except (BrokenPipeError, EOFError):
            return


class UnitRunner:
    """Runs units in this process, its messages to `post`: an Outbox in a worker (a message held goes with the next
    one sent), a Collected list in tests."""

    def __init__(self, config: WorkerConfig, registry: ConverterRegistry, post: Post | None = None,
                 feeder: Feeder | None = None) -> None:
        self.config = config
        self.registry = registry
        self.post = post if post is not None else Collected()
        self.send, self.hold, self.flush = self.post.send, self.post.hold, self.post.flush
        self.feeder = feeder  # prepares the units this runner is told to expect (fuzzer/campaign/ahead.py)
        self.check_options = CheckOptions(**config.check)
        self.versions: dict[str, dict[str, str]] = {}
        self.sent_cases: set[str] = set()  # case folder names this worker sent the campaign
        self.reduced_culprits: dict[str, str] = {}  # filed signature -> the operator its reduced case is filed under

    def phase(self, idx: int, converter: str | None, phase: Step) -> None:
        self.send(PhaseStarted(idx, converter, phase))

    def own_error(self, idx: int, seed: int, converter: str | None, phase: Step, exc: BaseException) -> None:
        self.send(OwnError(idx, seed, converter, phase.value, f"{type(exc).__module__}.{type(exc).__qualname__}",
                           str(exc), traceback.format_exc()))

    def expect(self, units: list[tuple[int, int, Sequence[Demotion]]]) -> None:
        """The (idx, seed, demoted pairs) of the units this worker runs next, in order: its feeder prepares them."""
        if self.feeder is not None:
            for idx, seed, demoted in units:
                if self.config.source_for(seed) is SourceKind.GRAPHS:  # a zoo unit has no graph to prepare
                    self.feeder.ask(idx, seed, demoted)

    def run_unit(self, idx: int, seed: int, converters: tuple[str, ...], demoted: Sequence[Demotion] = ()) -> None:
        """Settle the unit's source (the feeder's, when it has it ready), then test it with each converter.
        `demoted`: (operator, dtype) pairs the campaign generates less, each with the probability a graph leaves it
        out (fuzzer/campaign/policy/novelty.py)."""
        if self.config.source_for(seed) is SourceKind.ZOO:  # a zoo architecture, not a generated graph
            run_zoo_unit(self, idx, seed, converters)
            return
        # No "generate" phase message: the campaign counts a unit as being generated from when it became the current
        # one (its phase "sent"), which saves a write and a wake-up of the campaign per unit.
        start = time.perf_counter()
        ready = None
        if self.feeder is not None:
            self.feeder.ask(idx, seed, demoted)  # a no-op when expected
            ready = self.feeder.take(idx)
        timings: dict[str, float] = {"wait_for_graph": time.perf_counter() - start} if ready else {}
        if ready is not None:
            graph, prepared = ready.graph, ready.prepared
            timings.update(ready.timings)
            self.post.pass_on(ready.graph_message)  # encoded by the feeder, passed on as it is
        else:
            self.flush()  # generating can take long: the campaign must not count it as the last test's time
            settled = self.settle(idx, seed, timings, demoted)
            if settled is None:
                return
            graph, prepared = settled
        self.hold(UnitPrepared(idx, timings, self.config.values_for(seed).value))
        for name in converters:
            self.run_test(idx, seed, graph, name, prepared, demoted)

    def settle(self, idx: int, seed: int, timings: dict[str, float], demoted: Sequence[Demotion] = ()
               ) -> tuple[Graph, Prepared] | None:
        """Generate and prepare in this process; None (reported) when our own code fails."""
        start = time.perf_counter()
        try:
            graph = generate(seed, self.config.unit_gen_options(seed, demoted))
            timings["generate"] = time.perf_counter() - start
            self.send(graph_message(idx, graph))
            prepared = prepare(graph, seed, timings, self.check_options.input_budget_s, self.config.device,
                               self.config.values_for(seed))
        except Exception as exc:  # GenerationError, OpBug, anything: ours, never a converter's
            self.own_error(idx, seed, None, Step.GENERATE, exc)
            self.send(UnitFailed(idx, timings))
            return None
        return graph, prepared

    def run_test(self, idx: int, seed: int, graph: Graph, name: str, prepared: Prepared,
                 demoted: Sequence[Demotion] = ()) -> None:
        start = time.perf_counter()
        self.phase(idx, name, Step.CONVERT)
        converter = self.registry[name]
        decision = decide(self.config, converter, seed, graph, prepared, demoted,
                          lambda g, operators, timings: self.prepared_without(seed, g, operators, timings))
        if decision.kind.skips:
            self.skip(idx, seed, name, decision.label, decision.reason, decision.options, start, decision.timings,
                      steered_key(seed, demoted))
            return
        assert decision.graph is not None and decision.prepared is not None
        graph, traits = decision.graph, decision.traits
        try:
            result = check_prepared(decision.prepared, converter, decision.options, self.check_options, self.filed)
        except MemoryError:
            result = CheckResult(memory_verdict(name), {}, options=decision.options)
        except Exception as exc:  # a convsmith bug: counted and logged, never filed as the converter's
            self.own_error(idx, seed, name, Step.CONVERT, exc)
            self.send(TestResult.own_error(idx, seed, name, decision.options, wall_s=time.perf_counter() - start))
            return
        result = dataclasses.replace(result, verdict=result.verdict.with_labels(*decision.run_labels()),
                                     timings={**decision.timings, **result.timings})
        result, graph, cut_from = self.past_known(idx, seed, graph, converter, result, demoted)
        blame_timings: dict[str, float] = {}
        case_dir = self.file_case(idx, seed, graph, converter, result, blame_timings)
        if blame_timings:
            result = dataclasses.replace(result, timings={**result.timings, **blame_timings})
        # Held: it goes out with the next test's phase message (Outbox).
        rewrites = result.target.rewrites if result.target is not None else ()
        classes = result.target.rewrite_classes if result.target is not None else {}
        culprit = (self.culprit(graph, result.verdict) or "") if result.verdict.is_bug else ""
        self.hold(TestResult.of_verdict(idx, seed, result.verdict, result.options, result.timings,
                                        time.perf_counter() - start, case_dir, rewrites, cut_from, culprit,
                                        tuple(sorted(map(trait_detail, traits))), classes,
                                        steered_key(seed, demoted)))

    def skip(self, idx: int, seed: int, name: str, label: str, message: str, options: dict[str, Any],
             start: float, timings: dict[str, float] | None = None, steered: str = "") -> None:
        """Hold the result of a test not run: unsupported at the source, labelled `label`, saying why (`timings`:
        of what it did before it was skipped; `steered`: the target its unit was steered to, an attempt that ended
        before the tool)."""
        verdict = Verdict(Symptom.UNSUPPORTED, Stage.SOURCE, name, labels=(label,), message=message)
        self.hold(TestResult.of_verdict(idx, seed, verdict, options, timings, wall_s=time.perf_counter() - start,
                                        steered=steered))

    def past_known(self, idx: int, seed: int, graph: Graph, converter: Converter, result: CheckResult,
                   demoted: Sequence[Demotion] = ()) -> tuple[CheckResult, Graph, str]:
        """A test ending in a filed bug is run again on the graph without that bug's culprit operator (where its
        verdict names none: without every operator cut out for this converter's demoted bugs), at most CUT_ROUNDS
        times (culprit_cut.py): (the last result, its graph, the filed signature first hit)."""
        cut_from = ""
        for _ in range(CUT_ROUNDS if self.config.demote_known else 0):
            verdict = result.verdict
            if not (verdict.is_bug and verdict.signature and self.filed(verdict.signature)):
                break
            operator = self.culprit(graph, verdict)
            operators = [operator] if operator else known_culprits(graph, converter.name, demoted)
            start = time.perf_counter()
            inner: dict[str, float] = {}
            rest = self.prepared_without(seed, graph, operators, inner) if operators else None
            if rest is None:
                break
            smaller, prepared = rest
            self.phase(idx, converter.name, Step.CONVERT)  # a retest is timed as a test of its own, not as its tail
            try:
                retest = check_prepared(prepared, converter, result.options, self.check_options, self.filed)
            except Exception as exc:  # a convsmith bug: reported; the test keeps the result it had
                self.own_error(idx, seed, converter.name, Step.CONVERT, exc)
                break
            add_timings(inner, retest.timings)
            timings = dict(result.timings)
            add_timings(timings, {CUT_TIMER: time.perf_counter() - start})
            book_inner(timings, CUT_TIMER, inner)
            cut_from = cut_from or verdict.signature
            label = f"{CULPRIT_CUT if operator else CULPRIT_GUESSED}:{','.join(operators)}"
            result = dataclasses.replace(retest, verdict=retest.verdict.with_labels(label), timings=timings)
            graph = smaller
        return result, graph, cut_from

    def prepared_without(self, seed: int, graph: Graph, operators: Sequence[str], timings: dict[str, float]
                         ) -> tuple[Graph, Prepared] | None:
        """`graph` with every node of `operators` cut out, prepared (its steps timed into `timings`); None when nothing
        observable is left or the rest has no valid inputs (nothing to test it on)."""
        rest: Graph | None = graph
        for operator in operators:
            rest = without_culprit(rest, operator) if rest is not None else None
        if rest is None:
            return None
        prepared = prepare(rest, seed, timings, self.check_options.input_budget_s, self.config.device,
                           self.config.values_for(seed))
        return None if isinstance(prepared, CheckResult) else (rest, prepared)

    def culprit(self, graph: Graph, verdict: Verdict) -> str | None:
        """The graph operator a bug's root cause is filed under: the one its verdict names, else (an error that names
        none, as most of onnx2tf's do) the one the reduced case of its filed signature is filed under."""
        operator = culprit_operator(graph, verdict)
        if operator is not None or not verdict.signature:
            return operator
        if verdict.signature not in self.reduced_culprits:  # read once reduced; until then on every hit
            found = reduced_culprit(Path(self.config.out_dir) / case_id(verdict.signature))
            if found is None:
                return None
            self.reduced_culprits[verdict.signature] = found
        operator = self.reduced_culprits[verdict.signature]
        return operator if operator in graph.ops() else None

    def blamed(self, idx: int, seed: int, case: CaseData, converter: Converter, result: CheckResult,
               timings: dict[str, float]) -> CaseData:
        """The case with whose bug it is, decided as it is first filed (with_blame, timed into `timings`); as it
        was where deciding fails (our own error, reported: the case is filed all the same)."""
        start = time.perf_counter()
        try:
            return with_blame(case, converter, result.expected, own_framework=True)
        except Exception as exc:  # diagnosing is our code; the finding itself must not be lost
            self.own_error(idx, seed, converter.name, Step.CASE, exc)
            return case
        finally:
            timings[BLAME_TIMER] = time.perf_counter() - start

    def filed(self, signature: str) -> bool:
        """Whether the case of `signature` is filed: its folder exists, or this worker sent it (follow-ups skip the
        rerun of a filed signature)."""
        name = case_id(signature)
        return name in self.sent_cases or (Path(self.config.out_dir) / name).exists()

    def file_case(self, idx: int, seed: int, graph: Any, converter: Converter, result: CheckResult,
                  timings: dict[str, float]) -> str | None:
        """The case folder name of a bug. A case not filed yet is made here and held to go with the test's result:
        the campaign writes every folder (the first case of a signature wins), so writing it costs no worker time;
        deciding whose bug it is does, timed into `timings`. None when the verdict is no bug or the case could not
        be made."""
        verdict = result.verdict
        if not verdict.is_bug or not verdict.signature:
            return None
        name = case_id(verdict.signature)
        if self.filed(verdict.signature):
            return name
        self.phase(idx, converter.name, Step.CASE)
        try:
            if converter.name not in self.versions:
                self.versions[converter.name] = collect_versions(converter.distributions)
            case = case_from_result(result, graph, seed, converter.name, self.versions[converter.name],
                                    case_log(result), device=self.config.device,
                                    values=self.config.values_for(seed).value)
            # Sent before deciding whose bug it is: the other tools that runs may kill or hang this worker, and the
            # campaign then keeps the finding from this folder (fuzzer/campaign/lost.py).
            self.send(CaseSent(case_message(case)))
        except Exception as exc:  # making a case is our code
            self.own_error(idx, seed, converter.name, Step.CASE, exc)
            return None
        self.sent_cases.add(name)
        self.phase(idx, converter.name, Step.BLAME)
        blamed = self.blamed(idx, seed, case, converter, result, timings)
        if blamed is not case:
            self.hold(CaseSent(case_message(blamed), replace=True))
        return name
