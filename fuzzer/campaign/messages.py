"""The worker protocol: one frozen dataclass per message kind, and the one place they become bytes and back.

A frame is JSON, never a pickle: one message, or a JSON list of them (a worker's Outbox holds some to go with the
next). The campaign sends RunUnit, Demotions and Stop; a worker sends the rest, TestResult included
(fuzzer/campaign/result.py). Only transports (the worker's Inbox and Outbox, the supervisor's pipes, the feeder)
call encode and decode; everything else handles the dataclasses.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fuzzer.campaign.policy.novelty import Demotion
from fuzzer.campaign.result import TestResult

Pair = tuple[str, str]


class Step(str, enum.Enum):
    """What a worker is doing with its current unit: what a death or a hang then falls on."""

    SENT = "sent"  # generated, prepared or waited for: never a converter's
    GENERATE = "generate"  # an own error while generating or preparing
    CONVERT = "convert"  # the converter's test
    CASE = "case"  # making the case of a bug: our own code
    BLAME = "blame"  # deciding whose bug a case (already sent) is: the tools it reruns can kill or hang the worker


@dataclass(frozen=True)
class Ready:
    """A worker is up and takes units."""

    KIND: ClassVar[str] = "ready"
    pid: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "pid": self.pid}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ready:
        return cls(int(data["pid"]))


@dataclass(frozen=True)
class PhaseStarted:
    """A worker begins `phase` of unit `idx` under `converter`: sent before each step that can kill or hang it."""

    KIND: ClassVar[str] = "phase"
    idx: int
    converter: str | None
    phase: Step

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "idx": self.idx, "converter": self.converter, "phase": self.phase.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PhaseStarted:
        return cls(int(data["idx"]), data["converter"], Step(data["phase"]))


@dataclass(frozen=True)
class UnitGraph:
    """The graph of unit `idx` as JSON, its size, operator sequences and (operator, dtype) and feature pairs."""

    KIND: ClassVar[str] = "graph"
    idx: int
    graph: Mapping[str, Any]
    nodes: int
    sequences: tuple[str, ...] = ()
    pairs: tuple[Pair, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "idx": self.idx, "graph": self.graph, "nodes": self.nodes,
                "sequences": list(self.sequences), "pairs": [list(p) for p in self.pairs]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnitGraph:
        return cls(int(data["idx"]), data["graph"], int(data["nodes"]), tuple(data.get("sequences", ())),
                   tuple((op, detail) for op, detail in data.get("pairs", ())))


@dataclass(frozen=True)
class UnitPrepared:
    """Unit `idx`'s source is settled: its timings so far and how its inputs were drawn."""

    KIND: ClassVar[str] = "prepared"
    idx: int
    timings: Mapping[str, float]
    values: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "idx": self.idx, "timings": dict(self.timings), "values": self.values}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnitPrepared:
        return cls(int(data["idx"]), dict(data["timings"]), data.get("values"))


@dataclass(frozen=True)
class UnitFailed:
    """Unit `idx` could not be generated or prepared (an OwnError said why): its tests are our own errors."""

    KIND: ClassVar[str] = "unit_failed"
    idx: int
    timings: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "idx": self.idx, "timings": dict(self.timings)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnitFailed:
        return cls(int(data["idx"]), dict(data["timings"]))


@dataclass(frozen=True)
class OwnError:
    """A convsmith bug met while running a unit: logged and counted, never filed as a converter's."""

    KIND: ClassVar[str] = "own_error"
    idx: int | None
    seed: int | None
    converter: str | None
    phase: str
    exc_type: str
    message: str
    traceback: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "idx": self.idx, "seed": self.seed, "converter": self.converter,
                "phase": self.phase, "exc_type": self.exc_type, "message": self.message, "traceback": self.traceback}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OwnError:
        return cls(data.get("idx"), data.get("seed"), data.get("converter"), data["phase"], data["exc_type"],
                   data["message"], data["traceback"])


@dataclass(frozen=True)
class CaseSent:
    """A new bug's case, to be written by the campaign; `body` is its wire form (fuzzer/cases/wire.py). `replace`:
    the same case diagnosed, written over the one this worker sent before deciding whose bug it is."""

    KIND: ClassVar[str] = "case"
    body: Mapping[str, Any]
    replace: bool = False

    @property
    def converter(self) -> str | None:
        return self.body.get("case", {}).get("converter")

    def to_json(self) -> dict[str, Any]:
        return {**self.body, "type": self.KIND, "replace": self.replace}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseSent:
        body = {k: v for k, v in data.items() if k != "replace"}
        return cls(body, bool(data.get("replace", False)))


@dataclass(frozen=True)
class RunUnit:
    """Run unit `idx` (the graph of `seed`) with `converters`. `demoted` is not sent with it: the campaign sends
    Demotions when they change, and the worker's Inbox gives each unit those in force when it came."""

    KIND: ClassVar[str] = "unit"
    idx: int
    seed: int
    converters: tuple[str, ...]
    demoted: tuple[Demotion, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "idx": self.idx, "seed": self.seed, "converters": list(self.converters)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunUnit:
        return cls(int(data["idx"]), int(data["seed"]), tuple(data["converters"]))


@dataclass(frozen=True)
class Demotions:
    """The (operator, detail, chance) demotions in force for the units sent after this message."""

    KIND: ClassVar[str] = "demoted"
    demoted: tuple[Demotion, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "demoted": [list(d) for d in self.demoted]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Demotions:
        return cls(tuple((op, detail, chance) for op, detail, chance in data["demoted"]))


@dataclass(frozen=True)
class Stop:
    """The worker ends once it has sent what it holds."""

    KIND: ClassVar[str] = "stop"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Stop:
        return cls()


Message = (Ready | PhaseStarted | UnitGraph | UnitPrepared | UnitFailed | OwnError | CaseSent | TestResult | RunUnit
           | Demotions | Stop)
_KINDS: dict[str, Any] = {cls.KIND: cls for cls in (Ready, PhaseStarted, UnitGraph, UnitPrepared, UnitFailed,
                                                     OwnError, CaseSent, RunUnit, Demotions, Stop)}


def to_json(message: Message) -> dict[str, Any]:
    """A message as a JSON object, its kind under "type"."""
    if isinstance(message, TestResult):
        return message.to_message()
    return message.to_json()


def from_json(data: Mapping[str, Any]) -> Message:
    """The message a JSON object holds; a KeyError for a kind this protocol does not have."""
    if data["type"] == "result":
        return TestResult.from_message(data)
    return _KINDS[data["type"]].from_json(data)


def encode(message: Message | Sequence[Message]) -> bytes:
    """One frame: a message, or a list of them."""
    if isinstance(message, Sequence):
        return json.dumps([to_json(m) for m in message]).encode()
    return json.dumps(to_json(message)).encode()


def decode(frame: bytes) -> list[Message]:
    """The messages of one frame, in order."""
    data = json.loads(frame)
    return [from_json(m) for m in (data if isinstance(data, list) else (data,))]
