"""The worker process: a long-lived loop that runs test units sent over a pipe and reports each result.

A unit is (index, seed, converters, demoted pairs): generate the graph of the seed, materialize it and find inputs
once, then check it with each converter in turn, reporting a "phase" message before each step so the campaign knows
what was running when a process dies or hangs. A unit is a pure function of (seed, config, the (operator, dtype)
pairs the campaign demoted when it sent the unit): nothing else is read. The campaign queues units ahead of the
one running, so a worker never waits for the campaign, and its feeder (ahead.py) prepares them meanwhile.

Messages are JSON (send_bytes/recv_bytes), never pickles; a frame holds one message or a list of them (Outbox).
The worker ignores SIGINT (the campaign handles Ctrl-C), dies with its parent (PR_SET_PDEATHSIG), runs torch
single-threaded, limits its address space (RLIMIT_AS) and leaves fatal-signal tracebacks in a faulthandler file the
campaign reads, and a hang's when the campaign asks for them before the kill (fuzzer/support/faults.py).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
import random
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fuzzer.campaign.ahead import Feeder
from fuzzer.campaign.novelty import Demotion, without_demoted
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.settings import SKIPPED, settled_options
from fuzzer.campaign.unit_graph import encode, graph_message, op_dtype_pairs
from fuzzer.cases.case import case_from_result, case_id, case_log, collect_versions
from fuzzer.cases.wire import case_message
from fuzzer.check.pipeline import CheckOptions, CheckResult, check_prepared, prepare
from fuzzer.check.result import Prepared
from fuzzer.converters import DEFAULT_REGISTRY, ConverterRegistry, load_registry
from fuzzer.converters.base import Converter
from fuzzer.converters.upstream import (
    EXPORTERS,
    NATIVE,
    UPSTREAM_DEFAULT_OPSET,
    native_choice,
    native_seed,
    starts_upstream,
)
from fuzzer.support.confine import confine
from generators.dtypes import DType
from generators.generator import GenOptions, generate
from generators.ir import Graph
from generators.onnx_native import native_gen_options
from generators.values import ValueStrategy, draw_strategy
from oracles.taxonomy import memory_verdict
from oracles.verdict import Stage, Symptom, Verdict

# The share of graphs kept free of every pair a probed converter refuses, so that converter is tested too; the
# rest hold anything, and only the refusing converter's test is skipped.
SPARED_SHARE = 0.5


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs, as JSON: the same config and seed always give the same results."""

    out_dir: str
    log_dir: str
    registry: str = DEFAULT_REGISTRY
    min_nodes: int = 2
    nodes: int = 10
    include_ops: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    max_numel: int = GenOptions.max_numel
    avoid_pairs: tuple[tuple[str, str], ...] = ()  # (op, dtype) never generated: no converter here takes them
    # Per converter, (op, dtype) its probe found unsupported: its test of a graph holding one is skipped.
    skip_pairs: Mapping[str, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)
    converter_options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    check: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    timeout_s: float = 60.0
    memory_mb: int = 4096
    device: str = "cpu"
    vary_settings: bool = False  # each test draws its converter's options (the pinned ones kept); else defaults
    prepare_ahead: bool = False  # a feeder process prepares the next unit while this one converts (CPU only)
    values: tuple[str, ...] = (ValueStrategy.UNIFORM.value,)  # the value strategies tests draw from
    demote_known: bool = False  # generate less of the (operator, dtype) pairs behind bugs hit often (novelty.py)
    # The campaign's converters: where one is an ONNX tool, a share of seeds make graphs for the native upstream.
    # Empty in configs written before it, whose seeds keep their graphs.
    converters: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkerConfig:
        hinted = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if hinted[k].startswith("tuple") else v for k, v in data.items() if k in hinted}
        if "skip_pairs" in values:
            values["skip_pairs"] = {c: tuple(tuple(p) for p in pairs) for c, pairs in values["skip_pairs"].items()}
        return cls(**values)

    def values_for(self, seed: int) -> ValueStrategy:
        """How the inputs of the test of `seed` are drawn (recorded with the unit and in its cases)."""
        return draw_strategy(seed, tuple(ValueStrategy(v) for v in self.values))

    def known_unsupported(self, graph: Graph, converter: str, options: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The graph's (op, dtype) pairs this converter, or the upstream exporter it starts from, does not take."""
        # Looked up in both sets, not in their union: a union copies hundreds of pairs for every test.
        own = self._skip_sets.get(converter, frozenset())
        upstream = self._skip_sets.get(options.get("upstream", ""), frozenset())
        if not own and not upstream:
            return []
        return sorted(pair for pair in op_dtype_pairs(graph) if pair in own or pair in upstream)

    @functools.cached_property
    def _skip_sets(self) -> dict[str, frozenset[tuple[str, str]]]:
        # Built once: the probe's lists hold hundreds of pairs, and a set of them per test cost 0.1 ms.
        return {name: frozenset(tuple(p) for p in pairs) for name, pairs in self.skip_pairs.items()}

    @functools.cached_property
    def _avoid_sets(self) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
        # The pairs never generated, without and with the probe's skipped ones: two sets for the whole campaign, so
        # the generator's operator table, cached on them, is built twice, not for every graph (~3 ms each).
        never = frozenset((op, dtype) for op, dtype in self.avoid_pairs)
        return never, never.union(*self._skip_sets.values())

    def gen_options(self, seed: int) -> GenOptions:
        """The generator options of one seed: the node count is drawn from [min_nodes, nodes] by the seed."""
        nodes = random.Random(seed).randint(min(self.min_nodes, self.nodes), self.nodes)
        dtypes = tuple(DType(d) for d in self.dtypes) or GenOptions.dtypes
        never, spared = self._avoid_sets
        avoid = spared if random.Random(f"avoid:{seed}").random() < SPARED_SHARE else never
        opts = GenOptions(nodes=nodes, include_ops=self.include_ops, exclude_ops=self.exclude_ops, dtypes=dtypes,
                          max_numel=self.max_numel, avoid_pairs=avoid)
        # A native seed of a campaign that runs an ONNX tool: its graph holds only operators (and dtypes) with an ONNX
        # counterpart, so its ONNX tools can start from the graph written straight to ONNX (options_for).
        registry = load_registry(self.registry) if self.converters and native_seed(seed) else {}
        if any(starts_upstream(registry[name]) for name in self.converters if name in registry):
            return native_gen_options(opts) or opts
        return opts

    def options_for(self, converter: Converter, seed: int, graph: Graph | None = None) -> dict[str, Any]:
        """The converter options of the test of `seed` under `converter`, as JSON (recorded with its result). An
        ONNX tool of a native seed starts from the native model of `graph` where one can be written (unless an
        upstream is pinned); one whose drawn exporter is known not to take `graph` starts from the other exporter."""
        pinned = self.converter_options.get(converter.name) or {}
        native = (graph is not None and "upstream" not in pinned and starts_upstream(converter) and native_seed(seed)
                  and native_choice(graph, pinned))
        if not self.vary_settings:
            return converter.options(native or pinned).to_json()
        if native:  # at an opset drawn among those the native model can be written at
            return converter.options_type.draw(seed, {**pinned, "upstream": NATIVE}, graph).to_json()
        options = converter.options_type.draw(seed, pinned, graph).to_json()
        upstream = options.get("upstream")
        if upstream is None or "upstream" in pinned or graph is None or not self._refuses(upstream, graph):
            return options
        for other in EXPORTERS:
            if other != upstream and not self._refuses(other, graph):
                opset = pinned.get("opset", UPSTREAM_DEFAULT_OPSET[other])
                return converter.options_type.draw(seed, {**pinned, "upstream": other, "opset": opset}).to_json()
        return options

    def _refuses(self, exporter: str, graph: Graph) -> bool:
        return bool(op_dtype_pairs(graph) & self._skip_sets.get(exporter, frozenset()))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def setup_process(config: WorkerConfig) -> Any:
    """Confine this worker (fuzzer/support/confine.py) under its config's limits; returns the fault file."""
    return confine(config.memory_mb, config.device, config.log_dir)


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
    runner = UnitRunner(config, registry, outbox.send, feeder, outbox.hold, outbox.flush)
    runner.send({"type": "ready", "pid": os.getpid()})
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
        if msg.get("type") != "unit":
            outbox.flush()
            return
        runner.expect([(unit["idx"], unit["seed"], unit.get("demoted", ())) for unit in (msg, *pending)
                       if unit.get("type") == "unit"])
        try:
            runner.run_unit(msg["idx"], msg["seed"], tuple(msg["converters"]), msg.get("demoted", ()))
        except (BrokenPipeError, EOFError):
            return


class Inbox:
    """The campaign's messages to this worker, in order. The campaign sends the demotions in force only when they
    change, not with every unit (their JSON, 1.6 kB at ~60 demotions, cost ~0.1 ms per unit at each of the campaign,
    the worker and its feeder): each unit gets those in force when it was sent."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pending: collections.deque[dict[str, Any]] = collections.deque()
        self.demoted: tuple[Demotion, ...] = ()

    def receive(self) -> None:
        """Read one message (blocking): a unit or a stop joins `pending`, demotions apply to the units after them."""
        msg = json.loads(self.conn.recv_bytes())
        if msg.get("type") == "demoted":
            self.demoted = tuple((op, detail, chance) for op, detail, chance in msg["demoted"])
            return
        if msg.get("type") == "unit":
            msg.setdefault("demoted", self.demoted)
        self.pending.append(msg)


class Outbox:
    """The worker's messages to the campaign. A message held (already encoded) leaves with the next one sent, in one
    frame holding a JSON list: a test's result, and the next unit's graph and preparation, reach the campaign with
    the next test's "phase" message, one write and one wake-up of the campaign per test rather than four. Nothing is
    held across a step that can kill the process or run long (the phase message goes out before the converter runs;
    taking a prepared unit runs none and waits a quarter of the test timeout at most; the worker flushes before it
    generates a unit itself or waits for one), so a death or a hang is never blamed on a test whose end the
    campaign was not told of."""

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        self.write = write
        self.held: list[bytes] = []

    def hold(self, data: bytes) -> None:
        self.held.append(data)

    def send(self, msg: dict[str, Any]) -> None:
        self.held.append(encode(msg))
        self.flush()

    def flush(self) -> None:
        """Send what is held, if anything: one message as it is, several as one list."""
        if self.held:
            data = self.held[0] if len(self.held) == 1 else b"[" + b",".join(self.held) + b"]"
            self.held.clear()
            self.write(data)


class UnitRunner:
    """Runs units in this process; `send` delivers each message (an Outbox in a worker, a list in tests), `hold` one
    already encoded, to go with the next one sent (by default: decoded and sent at once), and `flush` sends what is
    held at once."""

    def __init__(self, config: WorkerConfig, registry: ConverterRegistry, send: Any,
                 feeder: Feeder | None = None, hold: Callable[[bytes], Any] | None = None,
                 flush: Callable[[], Any] | None = None) -> None:
        self.config = config
        self.registry = registry
        self.send = send
        self.hold = hold or (lambda data: send(json.loads(data)))
        self.flush = flush or (lambda: None)
        self.feeder = feeder  # prepares the units this runner is told to expect (fuzzer/campaign/ahead.py)
        self.check_options = CheckOptions(**config.check)
        self.versions: dict[str, dict[str, str]] = {}
        self.sent_cases: set[str] = set()  # case folder names this worker sent the campaign

    def phase(self, idx: int, converter: str | None, phase: str) -> None:
        self.send({"type": "phase", "idx": idx, "converter": converter, "phase": phase})

    def own_error(self, idx: int, seed: int, converter: str | None, phase: str, exc: BaseException) -> None:
        self.send({"type": "own_error", "idx": idx, "seed": seed, "converter": converter, "phase": phase,
                   "exc_type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc),
                   "traceback": traceback.format_exc()})

    def expect(self, units: list[tuple[int, int, Sequence[Demotion]]]) -> None:
        """The (idx, seed, demoted pairs) of the units this worker runs next, in order: its feeder prepares them."""
        if self.feeder is not None:
            for idx, seed, demoted in units:
                self.feeder.ask(idx, seed, demoted)

    def run_unit(self, idx: int, seed: int, converters: tuple[str, ...], demoted: Sequence[Demotion] = ()) -> None:
        """Settle the unit's source (the feeder's, when it has it ready), then test it with each converter.
        `demoted`: (operator, dtype) pairs the campaign generates less, each with the probability a graph leaves it
        out (fuzzer/campaign/novelty.py)."""
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
            self.hold(ready.graph_message)  # encoded by the feeder, passed on as it is
        else:
            self.flush()  # generating can take long: the campaign must not count it as the last test's time
            settled = self.settle(idx, seed, timings, demoted)
            if settled is None:
                return
            graph, prepared = settled
        self.hold(encode({"type": "prepared", "idx": idx, "timings": timings,
                          "values": self.config.values_for(seed).value}))
        for name in converters:
            self.run_test(idx, seed, graph, name, prepared, demoted)

    def settle(self, idx: int, seed: int, timings: dict[str, float], demoted: Sequence[Demotion] = ()
               ) -> tuple[Graph, Prepared] | None:
        """Generate and prepare in this process; None (reported) when our own code fails."""
        start = time.perf_counter()
        try:
            graph = generate(seed, without_demoted(self.config.gen_options(seed), seed, demoted))
            timings["generate"] = time.perf_counter() - start
            self.send(graph_message(idx, graph))
            prepared = prepare(graph, seed, timings, self.check_options.input_budget_s, self.config.device,
                               self.config.values_for(seed))
        except Exception as exc:  # GenerationError, OpBug, anything: ours, never a converter's
            self.own_error(idx, seed, None, "generate", exc)
            self.send({"type": "unit_failed", "idx": idx, "timings": timings})
            return None
        return graph, prepared

    def run_test(self, idx: int, seed: int, graph: Graph, name: str, prepared: Prepared,
                 demoted: Sequence[Demotion] = ()) -> None:
        start = time.perf_counter()
        self.phase(idx, name, "convert")
        converter = self.registry[name]
        opts, known_cause = settled_options(converter, self.config.options_for(converter, seed, graph), graph, seed,
                                            demoted)
        known = self.config.known_unsupported(graph, name, opts)
        if known or known_cause:  # the probe, or a setting demotion, already knows: a test that never ran
            label = "skipped-known-unsupported" if known else SKIPPED
            verdict = Verdict(Symptom.UNSUPPORTED, Stage.SOURCE, name, labels=(label,),
                              message=known_cause or "the probe found these (operator, dtype) pairs unsupported: "
                                      + ", ".join(f"{op} {dtype}" for op, dtype in known))
            self.hold(encode(TestResult.of_verdict(idx, seed, verdict, opts,
                                                   wall_s=time.perf_counter() - start).to_message()))
            return
        try:
            result = check_prepared(prepared, converter, opts, self.check_options, self.filed)
        except MemoryError:
            result = CheckResult(memory_verdict(name), {}, options=opts)
        except Exception as exc:  # a convsmith bug: counted and logged, never filed as the converter's
            self.own_error(idx, seed, name, "convert", exc)
            self.send(TestResult.own_error(idx, seed, name, opts, wall_s=time.perf_counter() - start).to_message())
            return
        case_dir = self.file_case(idx, seed, graph, converter, result)
        # Held: it goes out with the next test's phase message (Outbox).
        rewrites = result.target.rewrites if result.target is not None else ()
        self.hold(encode(TestResult.of_verdict(idx, seed, result.verdict, result.options, result.timings,
                                               time.perf_counter() - start, case_dir, rewrites).to_message()))

    def filed(self, signature: str) -> bool:
        """Whether the case of `signature` is filed: its folder exists, or this worker sent it (follow-ups skip the
        rerun of a filed signature)."""
        name = case_id(signature)
        return name in self.sent_cases or (Path(self.config.out_dir) / name).exists()

    def file_case(self, idx: int, seed: int, graph: Any, converter: Converter, result: CheckResult) -> str | None:
        """The case folder name of a bug. A case not filed yet is made here and held to go with the test's result:
        the campaign writes every folder (the first case of a signature wins), so writing it costs no worker time.
        None when the verdict is no bug or the case could not be made."""
        verdict = result.verdict
        if not verdict.is_bug or not verdict.signature:
            return None
        name = case_id(verdict.signature)
        if self.filed(verdict.signature):
            return name
        self.phase(idx, converter.name, "case")
        try:
            if converter.name not in self.versions:
                self.versions[converter.name] = collect_versions(converter.distributions)
            case = case_from_result(result, graph, seed, converter.name, self.versions[converter.name],
                                    case_log(result), device=self.config.device,
                                    values=self.config.values_for(seed).value)
            self.hold(encode(case_message(case)))
        except Exception as exc:  # making a case is our code
            self.own_error(idx, seed, converter.name, "case", exc)
            return None
        self.sent_cases.add(name)
        return name
