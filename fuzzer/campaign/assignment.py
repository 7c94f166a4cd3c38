"""What one worker is doing, as its messages tell: the unit it runs, the units queued behind it, the step it is at.

Bookkeeping only: the same whether the worker is a local process or a remote one."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

from fuzzer.campaign.messages import PhaseStarted, Step, UnitGraph
from fuzzer.campaign.policy.novelty import Demotion
from fuzzer.campaign.scheduler import Unit


@dataclass
class Assignment:
    """One worker's units and where it is in the current one."""

    unit: Unit | None = None
    # Units sent after `unit`, which the worker runs next (its feeder prepares them meanwhile), in order.
    ahead: collections.deque[Unit] = field(default_factory=collections.deque)
    converter: str | None = None
    phase: Step | None = None  # SENT (the current unit, generated or waited for), CONVERT, CASE or BLAME
    phase_start: float = 0.0
    case_dir: str | None = None  # the case folder last written for the current test (what BLAME works on)
    graph: dict[str, Any] | None = None
    nodes: int | None = None
    pairs: list[tuple[str, str]] = field(default_factory=list)  # the graph's (operator, dtype) pairs
    units_done: int = 0
    tests_done: int = 0
    demoted: list[Demotion] = field(default_factory=list)  # the demotions last sent to the worker

    @property
    def busy(self) -> bool:
        return self.unit is not None

    def begin(self, unit: Unit) -> None:
        """`unit` becomes the current one: counted as being generated from now."""
        self.unit, self.graph, self.nodes, self.pairs = unit, None, None, []
        self.phase, self.converter, self.phase_start = Step.SENT, None, time.monotonic()

    def started(self, msg: PhaseStarted) -> None:
        if msg.phase is not Step.BLAME:
            self.case_dir = None
        self.phase, self.converter, self.phase_start = msg.phase, msg.converter, time.monotonic()

    def graph_known(self, msg: UnitGraph) -> None:
        self.graph, self.nodes, self.pairs = dict(msg.graph), msg.nodes, list(msg.pairs)

    def takes(self, converter: str) -> bool:
        """Whether the current unit still waits for `converter`'s test."""
        return self.unit is not None and converter in self.unit.remaining

    def complete(self, converter: str) -> bool:
        """Count `converter`'s test of the current unit as recorded; True when it was the unit's last."""
        assert self.unit is not None
        self.unit.remaining.remove(converter)
        self.tests_done += 1
        return not self.unit.remaining

    def next_unit(self) -> None:
        """The current unit is done: the worker goes on to the next unit it holds, whose messages follow."""
        self.unit, self.phase, self.converter = None, None, None
        self.units_done += 1
        if self.ahead:
            unit = self.ahead.popleft()
            self.unit, self.graph, self.nodes, self.pairs = unit, None, None, []
            self.phase, self.phase_start = Step.SENT, time.monotonic()

    def release(self) -> list[Unit]:
        """The units queued behind the current one, none begun: handed back when the worker goes."""
        units = list(self.ahead)
        self.ahead.clear()
        return units
