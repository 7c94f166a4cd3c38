"""The feeder process prepares units ahead of the worker: what it hands back is exactly what the worker would have
prepared itself, in any order it is asked, and a feeder that fails costs a retry, never a unit."""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from fuzzer.campaign.ahead import ASK_BATCH, Feeder, prepare_ahead, rebuild
from fuzzer.campaign.mailbox import Outbox
from fuzzer.campaign.messages import PhaseStarted, Step, UnitPrepared, encode, to_json
from fuzzer.campaign.policy.novelty import Demotion, without_demoted
from fuzzer.campaign.unit_graph import graph_message, op_dtype_pairs
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.result import Expected
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.support.tensors import pack_arrays, unpack_arrays
from generators.generator import GenOptions, generate
from generators.values import ValueStrategy

UNREACHED_BUDGET_S = 600.0  # an input search's time budget that its step limit always comes before
CONFIG = WorkerConfig(out_dir="unused", log_dir="unused", min_nodes=3, nodes=6, timeout_s=20.0,
                      check={"input_budget_s": 0.2}, prepare_ahead=True)


def test_a_unit_prepared_ahead_is_bit_for_bit_the_unit_prepared_in_process() -> None:
    """Seeds in turn until ten units were prepared both ways (a seed whose source fails is left to the worker). The
    input search stops at its time budget: one it never reaches ends both searches alike on a loaded machine."""
    compared = 0
    for seed in range(100):
        if compared == 10:
            break
        header, note, body = prepare_ahead(CONFIG, UNREACHED_BUDGET_S, seed, seed)
        graph = generate(seed, CONFIG.gen_options(seed))
        local = prepare(graph, seed, {}, UNREACHED_BUDGET_S)
        if not isinstance(local, Expected):
            assert (header, note, body) == ({"idx": seed, "ok": False}, b"", b"")
            continue
        ready = rebuild(json.loads(json.dumps(header)), note, body)  # as it crosses the pipe
        theirs, ours = ready.prepared, local
        assert ready.graph.to_json() == graph.to_json()
        assert ready.graph_message == encode(graph_message(seed, graph))  # passed on to the campaign as it is
        assert theirs.valid_inputs == ours.valid_inputs
        for a, b in zip(theirs.source.inputs, ours.source.inputs, strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b)
        for name in graph.weights:
            a, b = getattr(theirs.source.module, name), getattr(ours.source.module, name)
            assert a.dtype == b.dtype and torch.equal(a, b)
        for a, b in zip(theirs.eager + theirs.reference, ours.eager + ours.reference, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        for kept, local_kept in ((theirs.settling, ours.settling), (theirs.settling64, ours.settling64)):
            assert kept is not None and local_kept is not None and kept.keys() == local_kept.keys()
            assert all(np.array_equal(kept[n], local_kept[n], equal_nan=True) for n in kept)
        assert set(ready.timings) >= {"ahead.generate", "ahead.inputs"}
        compared += 1
    assert compared == 10


# A feeder is forked from a worker that has one thread; pytest's process has more (a fork of it may inherit a held
# lock), so each feeder scenario runs in a fresh interpreter, as a worker does.
def in_fresh_process(scenario: str) -> None:
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_ahead; test_ahead.{scenario}()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_the_feeder_answers_each_unit_in_whatever_order_the_worker_takes_them() -> None:
    in_fresh_process("answers_in_any_order")


@pytest.mark.slow
def test_the_feeder_prepares_every_unit_asked_for_before_the_worker_reads_one() -> None:
    in_fresh_process("works_ahead_past_a_full_pipe")


@pytest.mark.slow
def test_the_feeder_is_told_the_demotions_only_when_they_change_and_applies_them_to_the_units_after() -> None:
    in_fresh_process("demotions_on_change")


@pytest.mark.slow
def test_the_worker_sends_its_requests_to_the_feeder_in_batches_and_a_unit_it_takes_at_once() -> None:
    in_fresh_process("asks_in_batches")


@pytest.mark.slow
def test_a_killed_feeder_costs_a_retry_and_the_worker_prepares_every_unit_from_then_on() -> None:
    in_fresh_process("killed_feeder")


@pytest.mark.slow
def test_a_unit_prepared_ahead_reaches_the_campaign_in_one_frame_before_its_converter_runs() -> None:
    in_fresh_process("one_frame_per_unit")


def test_the_outbox_sends_what_it_holds_with_the_next_message_as_one_list() -> None:
    frames: list[bytes] = []
    outbox = Outbox(frames.append)
    phases = [to_json(PhaseStarted(n, "c", Step.CONVERT)) for n in range(4)]
    outbox.send(PhaseStarted(1, "c", Step.CONVERT))
    outbox.pass_on(b'{"type": "graph"}')  # encoded by the feeder
    outbox.hold(UnitPrepared(2, {}))
    outbox.send(PhaseStarted(2, "c", Step.CONVERT))
    outbox.send(PhaseStarted(3, "c", Step.CONVERT))
    outbox.hold(PhaseStarted(0, "c", Step.CONVERT))
    outbox.flush()
    outbox.flush()  # nothing held: nothing sent
    assert [json.loads(f) for f in frames] == [phases[1], [{"type": "graph"}, to_json(UnitPrepared(2, {})), phases[2]],
                                              phases[3], phases[0]]


@pytest.mark.slow
def test_an_answer_the_worker_cannot_rebuild_is_left_to_the_worker() -> None:
    in_fresh_process("unbuildable_answer")


def test_arrays_cross_the_pipe_with_their_dtype_shape_and_values_each_a_writable_copy() -> None:
    arrays = {"w:empty": np.zeros((0, 3), np.float32), "i:x": np.arange(6, dtype=np.int64).reshape(2, 3),
              "e:0": np.array(1.5, dtype=ml_dtypes.bfloat16), "r:0": np.array([True, False])}
    index, body = pack_arrays(arrays)
    back = unpack_arrays(index, body)
    assert list(back) == list(arrays)
    for name, array in arrays.items():
        assert (back[name].dtype, back[name].shape) == (array.dtype, array.shape)
        assert back[name].tobytes() == array.tobytes() and back[name].flags.writeable
    with pytest.raises(ValueError, match="smaller than requested"):
        unpack_arrays(index, body[:-1])  # a truncated answer: the worker prepares the unit itself


@pytest.mark.slow
def test_a_graph_the_generator_rejects_is_left_to_the_worker() -> None:
    config = WorkerConfig(out_dir="unused", log_dir="unused", include_ops=("no_such_operator",), prepare_ahead=True)
    assert prepare_ahead(config, 0.2, 5, 5) == ({"idx": 5, "ok": False}, b"", b"")
    in_fresh_process("rejected_graph")


def answers_in_any_order() -> None:
    feeder = Feeder(CONFIG, 0.2)
    try:
        for idx in range(3):
            feeder.ask(idx, 40 + idx)
        taken = {idx: feeder.take(idx) for idx in (2, 0, 1)}
        assert all(unit is not None for unit in taken.values()), taken
        assert {idx: unit.graph.to_json() for idx, unit in taken.items()} == \
               {idx: generate(40 + idx, CONFIG.gen_options(40 + idx)).to_json() for idx in range(3)}
        assert feeder.take(7) is None  # never asked
    finally:
        feeder.stop()


def works_ahead_past_a_full_pipe() -> None:
    """Units of up to 64k elements hold more arrays than the pipe does: the feeder must not wait for the worker to
    read before it prepares the next one."""
    config = dataclasses.replace(CONFIG, max_numel=65536, min_nodes=6)
    seeds = _seeds_past_the_pipe(config)
    started, told = os.pipe()
    feeder = Feeder(Announcing(config, SENTINEL_SEEDS[0], told), 0.2)
    try:
        for idx, seed in enumerate((*seeds, *SENTINEL_SEEDS)):
            feeder.ask(idx, seed)
        # The feeder starts the first sentinel once it has prepared every unit before it, whatever the pipe holds.
        assert select.select([started], [], [], 100.0)[0], "the feeder never reached the units after the seeds"
        first_read = time.monotonic()
        units = [feeder.take(idx) for idx in range(len(seeds))]  # the sentinels are never read
        assert all(unit is not None for unit in units)
        carried = sum(sum(x.nbytes for x in (*unit.prepared.eager, *unit.prepared.reference))
                      + sum(x.numel() * x.element_size() for x in unit.prepared.source.inputs) for unit in units)
        with socket.socket(fileno=os.dup(feeder.conn.fileno())) as pipe:  # the pipe is a Unix socket pair
            assert carried > 2 * pipe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        assert all(unit.done_at < first_read for unit in units)
    finally:
        feeder.stop()
        os.close(started)
        os.close(told)


# Units asked for after the seeds under test, one whole request batch, so that the feeder is sent them at once.
SENTINEL_SEEDS = tuple(range(1, 1 + ASK_BATCH))


@dataclasses.dataclass(frozen=True)
class Announcing:
    """A worker's config that writes a byte to `fd` when the feeder starts the unit of `seed` (it prepares the units
    in the order asked, so every unit asked for before that one is ready by then)."""

    config: WorkerConfig
    seed: int
    fd: int

    @property
    def timeout_s(self) -> float:
        return self.config.timeout_s

    def unit_gen_options(self, seed: int, demoted: Sequence[Demotion] = ()) -> GenOptions:
        if seed == self.seed:
            os.write(self.fd, b"!")
        return self.config.unit_gen_options(seed, demoted)

    def values_for(self, seed: int) -> ValueStrategy:
        return self.config.values_for(seed)


def _seeds_past_the_pipe(config: WorkerConfig) -> list[int]:
    """Seeds from 300 on, as many as it takes for their graphs' inputs and outputs alone to hold twice what the pipe
    does (what seeds draw is the generator's business: the sizes are read, not pinned), in whole request batches."""
    left, right = socket.socketpair()
    with left, right:
        needed = 2 * left.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    seeds: list[int] = []
    for seed in range(300, 400):
        graph = generate(seed, config.gen_options(seed))
        held = [graph.types[n] for n in (*graph.inputs, *graph.outputs)]
        needed -= sum(t.numel * t.dtype.numpy.itemsize for t in held)
        seeds.append(seed)
        if needed < 0 and len(seeds) % ASK_BATCH == 0:  # requests leave in batches: none left unsent
            return seeds
    raise AssertionError("100 graphs of up to 64k elements do not fill the pipe twice")


def one_frame_per_unit() -> None:
    config = dataclasses.replace(CONFIG, min_nodes=2, nodes=2)
    frames: list[bytes] = []
    outbox = Outbox(frames.append)
    feeder = Feeder(config, 0.2)
    try:
        runner = UnitRunner(config, CONVERTERS, outbox, feeder=feeder)
        runner.run_unit(0, 11, ("torch-onnx-script",))
        sent_by_the_unit = len(frames)
        runner.run_unit(1, 12, ("torch-onnx-script",))
    finally:
        feeder.stop()
    outbox.flush()
    messages = [json.loads(f) for f in frames]
    # One frame per test, before its converter runs: the graph and its preparation go out with the phase (the
    # campaign counts the unit as generating from when it became the current one).
    assert sent_by_the_unit == 1
    graph, prepared, phase = messages[0]
    assert graph == json.loads(encode(graph_message(0, generate(11, config.gen_options(11)))))
    assert prepared["type"] == "prepared" and {"wait_for_graph", "ahead.generate"} <= set(prepared["timings"])
    assert phase == {"type": "phase", "idx": 0, "converter": "torch-onnx-script", "phase": "convert"}
    # The result waits for the next frame: the next unit's, or the flush before the worker waits for one.
    assert [m["type"] for m in messages[1]] == ["result", "graph", "prepared", "phase"]
    assert (messages[1][0]["idx"], messages[1][3]["idx"]) == (0, 1)
    assert messages[2]["type"] == "result" and messages[2]["idx"] == 1


def demotions_on_change() -> None:
    seeds = (40, 41, 42)
    pair = sorted(op_dtype_pairs(generate(41, CONFIG.gen_options(41))))[0]
    demoted = [((*pair, 1.0),), ((*pair, 1.0),), ()]  # the one of seed 41's pairs, left out of every graph
    feeder = Feeder(CONFIG, 0.2)
    writes = _recorded_writes(feeder)
    try:
        for idx, (seed, demotions) in enumerate(zip(seeds, demoted, strict=True)):
            feeder.ask(idx, seed, demotions)
        taken = [feeder.take(idx) for idx in range(3)]
    finally:
        feeder.stop()
    assert len(writes) == 1  # fewer than ASK_BATCH: sent when the first was taken
    assert [r.get("demoted") for r in writes[0]] == [[[*pair, 1.0]], None, []]
    assert all(unit is not None for unit in taken)
    assert [unit.graph.to_json() for unit in taken if unit is not None] == \
           [generate(seed, without_demoted(CONFIG.gen_options(seed), seed, demotions)).to_json()
            for seed, demotions in zip(seeds, demoted, strict=True)]
    assert taken[1] is not None and pair not in op_dtype_pairs(taken[1].graph)


def asks_in_batches() -> None:
    config = dataclasses.replace(CONFIG, min_nodes=2, nodes=2)
    feeder = Feeder(config, 0.2)
    writes = _recorded_writes(feeder)

    def asked() -> list[list[int]]:
        return [[request["idx"] for request in write] for write in writes]

    try:
        for idx in range(ASK_BATCH * 2 + 1):
            feeder.ask(idx, 60 + idx)
        assert asked() == [list(range(ASK_BATCH)), list(range(ASK_BATCH, ASK_BATCH * 2))]
        taken = [feeder.take(idx) for idx in range(ASK_BATCH * 2)]
        assert len(writes) == 2  # each of them was sent already
        taken.append(feeder.take(ASK_BATCH * 2))  # the last, never sent: sent now
        assert asked()[2:] == [[ASK_BATCH * 2]]
    finally:
        feeder.stop()
    assert [unit.graph.to_json() for unit in taken if unit is not None] == \
           [generate(60 + idx, config.gen_options(60 + idx)).to_json() for idx in range(ASK_BATCH * 2 + 1)]


def _recorded_writes(feeder: Feeder) -> list[list[dict]]:
    """Every batch of requests the worker writes to `feeder` from now on, decoded, in order."""
    writes: list[list[dict]] = []
    assert feeder.conn is not None
    send = feeder.conn.send_bytes
    feeder.conn.send_bytes = lambda data: (writes.append(json.loads(data)), send(data))  # type: ignore[method-assign]
    return writes


def unbuildable_answer() -> None:
    import fuzzer.campaign.ahead as ahead

    def corrupt(*args: object) -> None:
        raise ValueError("a corrupt answer")

    feeder = Feeder(CONFIG, 0.2)
    try:
        feeder.ask(0, 40)
        feeder.ask(1, 41)
        ahead.rebuild, rebuild_answer = corrupt, ahead.rebuild
        assert feeder.take(0) is None  # never raised in the worker: a result it holds must still go out
        ahead.rebuild = rebuild_answer
        assert feeder.alive and feeder.take(1) is not None
    finally:
        feeder.stop()


def killed_feeder() -> None:
    feeder = Feeder(CONFIG, 0.2)
    feeder.ask(0, 1)
    assert feeder.pid is not None
    os.kill(feeder.pid, signal.SIGKILL)
    assert feeder.take(0) is None  # the worker prepares it itself
    assert not feeder.alive
    feeder.ask(1, 2)
    assert feeder.take(1) is None


def rejected_graph() -> None:
    config = WorkerConfig(out_dir="unused", log_dir="unused", include_ops=("no_such_operator",), prepare_ahead=True)
    feeder = Feeder(config, 0.2)
    try:
        feeder.ask(5, 5)
        assert feeder.take(5) is None
        assert feeder.alive  # a rejected graph is an answer, not a failure
    finally:
        feeder.stop()
