"""A worker's side of its pipe to the campaign: the Inbox reads the campaign's messages, the Outbox frames the
worker's own (fuzzer/campaign/messages.py is the protocol)."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from fuzzer.campaign.messages import Demotions, Message, RunUnit, Stop, decode, encode
from fuzzer.campaign.policy.novelty import Demotion


class Inbox:
    """The campaign's messages to this worker, in order. The campaign sends the demotions in force only when they
    change, not with every unit (their JSON, 1.6 kB at ~60 demotions, cost ~0.1 ms per unit at each of the campaign,
    the worker and its feeder): each unit gets those in force when it was sent."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pending: collections.deque[RunUnit | Stop] = collections.deque()
        self.demoted: tuple[Demotion, ...] = ()

    def receive(self) -> None:
        """Read one frame (blocking): a unit or a stop joins `pending`, demotions apply to the units after them."""
        for msg in decode(self.conn.recv_bytes()):
            if isinstance(msg, Demotions):
                self.demoted = msg.demoted
            elif isinstance(msg, RunUnit):
                self.pending.append(dataclasses.replace(msg, demoted=self.demoted))
            elif isinstance(msg, Stop):
                self.pending.append(msg)


class Outbox:
    """The worker's messages to the campaign. A message held leaves with the next one sent, in one frame holding a
    JSON list: a test's result, and the next unit's graph and preparation, reach the campaign with the next test's
    "phase" message, one write and one wake-up of the campaign per test rather than four. Nothing is held across a
    step that can kill the process or run long (the phase message goes out before the converter runs; taking a
    prepared unit runs none and waits a quarter of the test timeout at most; the worker flushes before it generates
    a unit itself or waits for one), so a death or a hang is never blamed on a test whose end the campaign was not
    told of."""

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        self.write = write
        self.held: list[bytes] = []

    def hold(self, msg: Message) -> None:
        self.held.append(encode(msg))

    def pass_on(self, data: bytes) -> None:
        """Hold a message another process encoded (the feeder's graph), as it is."""
        self.held.append(data)

    def send(self, msg: Message) -> None:
        self.hold(msg)
        self.flush()

    def flush(self) -> None:
        """Send what is held, if anything: one message as it is, several as one list."""
        if self.held:
            data = self.held[0] if len(self.held) == 1 else b"[" + b",".join(self.held) + b"]"
            self.held.clear()
            self.write(data)


class Post(Protocol):
    """Where a UnitRunner's messages go: an Outbox in a worker, a Collected in tests and tools."""

    def send(self, msg: Message) -> None: ...

    def hold(self, msg: Message) -> None: ...

    def pass_on(self, data: bytes) -> None: ...

    def flush(self) -> None: ...


@dataclasses.dataclass
class Collected:
    """Messages kept in a list, in order, each as soon as it is sent or held (no process boundary to frame)."""

    messages: list[Message] = dataclasses.field(default_factory=list)

    def send(self, msg: Message) -> None:
        self.messages.append(msg)

    def hold(self, msg: Message) -> None:
        self.messages.append(msg)

    def pass_on(self, data: bytes) -> None:
        self.messages.extend(decode(data))

    def flush(self) -> None:
        pass
