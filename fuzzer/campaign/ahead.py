"""Preparing graphs ahead: a feeder process, forked by the worker, generates the next unit's graph and settles its
source (input search, eager and float64 runs) while the worker converts the current one.

Generation and conversion then run in processes of their own: on a machine with a core to spare the converter no
longer waits for the generator, and each loop keeps its caches warm (interleaved in one process, both ran at about
half their tight-loop speed). The feeder is only a shortcut: whatever it does not hand back prepared (a graph the
generator rejects, a source that fails, a feeder that died or hangs, an answer the worker cannot rebuild) the worker
prepares itself, in process, as before, so every failure is met and reported where it always was, and the results
are the same either way.

Wire: the worker sends its requests in batches, a JSON list of {"idx", "seed"}, each with "demoted" when the
demotions changed since the request before it; the feeder answers each request with three frames: a JSON header, the
unit's "graph" message for the campaign (JSON, made here once and passed on by the worker as it is, not decoded and
encoded again), then the arrays' bytes (fuzzer.support.tensors.pack_arrays). Never a pickle.
"""

from __future__ import annotations

import collections
import faulthandler
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any, Protocol

from fuzzer.campaign.messages import encode
from fuzzer.campaign.policy.novelty import Demotion
from fuzzer.campaign.progress import AHEAD
from fuzzer.campaign.unit_graph import graph_message
from fuzzer.check.result import Expected
from fuzzer.check.source import prepare
from fuzzer.converters.conversion import Source
from fuzzer.support.confine import detach_from_terminal_and_parent
from fuzzer.support.tensors import pack_arrays, to_case_array, to_torch, unpack_arrays
from generators.generator import GenOptions, generate
from generators.ir import Graph
from generators.materialize import GraphModule
from generators.solver import Z3Context, unused_z3_context
from generators.values import ValueStrategy

WAIT_SHARE = 0.25  # of the test timeout: how long the worker waits for a unit before preparing it itself
# Fresh z3 contexts a feeder keeps made in its idle time: making one is ~3.5 ms of a five-node graph's ~20 ms, and a
# feeder that has fallen behind (the worker waits) then starts each graph without it. A few MiB each.
SPARE_Z3_CONTEXTS = 4
# Requests the worker sends to its feeder in one write. A write that wakes the feeder cost the worker ~0.25 ms of wall
# time (the woken process preempts it), 0.8% of a 10-node loop when each unit was asked for alone; the feeder still has
# 12 to 16 units asked for when the campaign keeps AHEAD_UNITS queued.
ASK_BATCH = 4


class UnitConfig(Protocol):
    """What the feeder reads of a worker's config (fuzzer.campaign.worker_config.WorkerConfig)."""

    timeout_s: float

    def unit_gen_options(self, seed: int, demoted: Sequence[Demotion] = ()) -> GenOptions: ...

    def values_for(self, seed: int) -> ValueStrategy: ...


@dataclass(frozen=True)
class ReadyUnit:
    """A unit the feeder prepared, rebuilt in the worker: the same graph and settled source as in process."""

    graph: Graph
    graph_message: bytes  # the campaign's "graph" message, encoded by the feeder
    prepared: Expected
    timings: dict[str, float]
    done_at: float  # time.monotonic() when the feeder finished it


# ---- the feeder process ---------------------------------------------------------------------------------------

def feeder_main(conn: Connection, config: UnitConfig, input_budget_s: float) -> None:
    """Answer each request in turn until the worker's end of the pipe closes. Answers leave through a thread of
    their own: the pipe holds a few units' arrays at most (tens of kB each), and a feeder that sent them itself stopped
    at the first full pipe, keeping two to four units ahead at 10 nodes rather than the campaign's AHEAD_UNITS."""
    detach_from_terminal_and_parent()
    faulthandler.disable()  # the worker's fault file tells of the worker; a feeder's crash only costs a retry
    outbox: queue.SimpleQueue[tuple[bytes, bytes, bytes]] = queue.SimpleQueue()
    threading.Thread(target=send_answers, args=(conn, outbox), name="convsmith-feeder-sender", daemon=True).start()
    spare: list[Z3Context] = []  # made while no request waits, each used by one graph (fresh_z3_context)
    demoted: Sequence[Demotion] = ()  # a request names them when they changed (Feeder.ask)
    while True:
        try:
            while len(spare) < SPARE_Z3_CONTEXTS and not conn.poll(0):
                spare.append(unused_z3_context())
            requests = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        for request in requests:
            demoted = request.get("demoted", demoted)
            header, note, body = prepare_ahead(config, input_budget_s, request["idx"], request["seed"], demoted,
                                               spare.pop() if spare else None)
            outbox.put((_json_bytes(header), note, body))


def send_answers(conn: Connection, outbox: queue.SimpleQueue[tuple[bytes, bytes, bytes]]) -> None:
    """Send each prepared answer, in order, as fast as the worker reads them (until the pipe closes)."""
    while True:
        frames = outbox.get()
        try:
            for frame in frames:
                conn.send_bytes(frame)
        except OSError:
            return


def prepare_ahead(config: UnitConfig, input_budget_s: float, idx: int, seed: int, demoted: Sequence[Demotion] = (),
                  z3_context: Z3Context | None = None) -> tuple[dict[str, Any], bytes, bytes]:
    """The header, the encoded "graph" message and the array bytes of one unit; a header {"ok": false} (and empty
    frames) when the worker should prepare it itself. `z3_context`: an unused one made earlier, for the graph."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    try:
        graph = generate(seed, config.unit_gen_options(seed, demoted), z3_context=z3_context)
        timings["generate"] = time.perf_counter() - start
        prepared = prepare(graph, seed, timings, input_budget_s, "cpu", config.values_for(seed))
    except Exception:  # the worker meets it again in process, and reports it as its own
        return {"idx": idx, "ok": False}, b"", b""
    if not isinstance(prepared, Expected):  # the source failed: its verdict is the worker's to give
        return {"idx": idx, "ok": False}, b"", b""
    source = prepared.source
    arrays = {f"w:{n}": to_case_array(getattr(source.module, n)) for n in graph.weights}
    arrays |= {f"i:{n}": to_case_array(x) for n, x in zip(graph.inputs, source.inputs, strict=True)}
    arrays |= {f"e:{k}": x for k, x in enumerate(prepared.eager)}
    arrays |= {f"r:{k}": x for k, x in enumerate(prepared.reference)}
    arrays |= {f"s:{n}": x for n, x in (prepared.settling or {}).items()}
    arrays |= {f"S:{n}": x for n, x in (prepared.settling64 or {}).items()}
    index, body = pack_arrays(arrays)
    header = {"idx": idx, "ok": True, "valid": prepared.valid_inputs, "values": prepared.values, "timings": timings,
              "arrays": index,
              "done_at": time.monotonic()}  # the system-wide clock: how far ahead of its turn the unit was ready
    return header, encode(graph_message(idx, graph)), body


def rebuild(header: dict[str, Any], note: bytes, body: bytes) -> ReadyUnit:
    """The worker's copy of a prepared unit: the module made from the settled weights, not drawn again."""
    graph = Graph.from_json(json.loads(note)["graph"])
    arrays = _by_kind(unpack_arrays(header["arrays"], body))
    weights, given = arrays["w"], arrays["i"]
    module = GraphModule(graph, {n: to_torch(weights[n]) for n in graph.weights})
    inputs = tuple(to_torch(given[n]) for n in graph.inputs)
    outputs = [str(k) for k in range(len(graph.outputs))]
    prepared = Expected(Source(graph, module, inputs), tuple(arrays["e"][k] for k in outputs),
                        tuple(arrays["r"][k] for k in outputs), valid_inputs=header["valid"],
                        values=header["values"], settling=arrays["s"], settling64=arrays["S"])
    timings = {AHEAD + name: seconds for name, seconds in header["timings"].items()}
    return ReadyUnit(graph, note, prepared, timings, header["done_at"])


def _json_bytes(data: Any) -> bytes:
    """The feeder's own frames (requests, headers): JSON, never a pickle."""
    return json.dumps(data).encode()


def _by_kind(arrays: dict[str, Any]) -> collections.defaultdict[str, dict[str, Any]]:
    """The packed arrays ("w:name", "e:0", ...) grouped by kind, each kind by its name."""
    kinds: collections.defaultdict[str, dict[str, Any]] = collections.defaultdict(dict)
    for key, x in arrays.items():
        kind, _, name = key.partition(":")
        kinds[kind][name] = x
    return kinds


# ---- the worker's side ----------------------------------------------------------------------------------------

class Feeder:
    """The worker's handle on its feeder process: `ask` for units in the order they will run, `take` each when due.

    The feeder is forked once, when the worker starts and has no other thread (a fork taken later could inherit a
    lock another thread holds). Once it dies or hangs, the worker prepares every unit itself until it is recycled.
    """

    def __init__(self, config: UnitConfig, input_budget_s: float) -> None:
        self.wait_s = max(config.timeout_s * WAIT_SHARE, 1.0)
        self.asked: collections.deque[int] = collections.deque()  # in the order the feeder answers them
        self.unsent: list[dict[str, Any]] = []  # the last requests asked, not yet sent (ASK_BATCH)
        self.demoted: Sequence[Demotion] = ()  # the demotions last sent to the feeder, in force for what follows
        self.answers: dict[int, tuple[dict[str, Any], bytes, bytes]] = {}
        # os.fork, not multiprocessing: the worker is a daemonic process, which multiprocessing forbids children.
        ours, theirs = Pipe()
        pid = os.fork()
        if pid == 0:  # the feeder
            code = 0
            try:
                ours.close()
                feeder_main(theirs, config, input_budget_s)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        self.conn: Connection | None = ours
        self.pid: int | None = pid

    @property
    def alive(self) -> bool:
        return self.conn is not None

    def ask(self, idx: int, seed: int, demoted: Sequence[Demotion] = ()) -> None:
        """Queue the unit `idx` for preparation (a no-op when it is already queued or answered, or the feeder is
        gone). Requests leave ASK_BATCH at a time, or when `take` needs one."""
        if self.conn is None or idx in self.asked or idx in self.answers:
            return
        request: dict[str, Any] = {"idx": idx, "seed": seed}
        if demoted is not self.demoted and tuple(demoted) != tuple(self.demoted):
            request["demoted"], self.demoted = list(demoted), demoted
        self.unsent.append(request)
        self.asked.append(idx)
        if len(self.unsent) >= ASK_BATCH:
            self._send_requests()

    def _send_requests(self) -> None:
        assert self.conn is not None
        try:
            self.conn.send_bytes(_json_bytes(self.unsent))
        except OSError:
            self.stop("its pipe closed")
            return
        self.unsent.clear()

    def take(self, idx: int) -> ReadyUnit | None:
        """The prepared unit `idx`, or None: not asked for, not prepared, or the feeder failed. Answers that come
        first are kept for their own turn."""
        if idx not in self.answers and (idx not in self.asked or self.conn is None):
            return None
        if any(request["idx"] == idx for request in self.unsent):
            self._send_requests()
            if self.conn is None:
                return None
        deadline = time.monotonic() + self.wait_s
        try:
            while idx not in self.answers:
                assert self.conn is not None
                if not self.conn.poll(max(deadline - time.monotonic(), 0.0)):
                    self.stop(f"no answer in {self.wait_s:g} s")  # the worker meets the hang itself
                    return None
                header = json.loads(self.conn.recv_bytes())
                self.answers[self.asked.popleft()] = (header, self.conn.recv_bytes(), self.conn.recv_bytes())
        except (EOFError, OSError):
            self.stop("it died")
            return None
        header, note, body = self.answers.pop(idx)
        if not header["ok"]:
            return None
        try:
            return rebuild(header, note, body)
        except Exception:  # the worker prepares the unit itself, where an error of ours is met and reported
            return None

    def stop(self, why: str = "") -> None:
        """Kill the feeder; from now on the worker prepares every unit itself."""
        if self.pid is not None:
            if why:
                print(f"convsmith worker: feeder {self.pid} stopped ({why}); preparing graphs in process",
                      file=sys.stderr, flush=True)
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        if self.conn is not None:
            self.conn.close()
        self.conn, self.pid = None, None
        self.asked.clear()
        self.unsent.clear()
        self.answers.clear()
