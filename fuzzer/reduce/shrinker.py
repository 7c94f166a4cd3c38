"""The reducer: passes over a concrete graph, run to a fixpoint, keeping only smaller graphs with the same bug.

One acceptance point (`Shrinker.consider`): a candidate is pruned, validated, and kept only when it still has an
operator, is strictly smaller in the size order (fuzzer/reduce/size.py) and `is_same_bug` says it still shows the
same bug. The
passes live in fuzzer/reduce/passes.py, listed once in PASSES; each keeps tries/accepts/seconds statistics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzer.reduce.passes import PASSES, Pass
from fuzzer.reduce.size import graph_size
from generators.edit import prune, retype
from generators.ir import Graph, GraphError, validate
from generators.registry import REGISTRY


@dataclass
class PassStats:
    """How one pass did: candidates it proposed that reached the oracle, accepted ones, time spent."""

    name: str
    tries: int = 0
    accepts: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "tries": self.tries, "accepts": self.accepts, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class ReduceResult:
    graph: Graph
    size_before: tuple[float, ...]
    size_after: tuple[float, ...]
    stats: tuple[PassStats, ...]
    seconds: float
    checks: int
    rounds: int
    exhausted: bool  # the time budget ran out before a fixpoint

    @property
    def helped(self) -> list[str]:
        return [s.name for s in self.stats if s.accepts]

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes_before": int(self.size_before[0]),
            "nodes_after": int(self.size_after[0]),
            "size_before": list(self.size_before),
            "size_after": list(self.size_after),
            "seconds": round(self.seconds, 3),
            "checks": self.checks,
            "rounds": self.rounds,
            "exhausted": self.exhausted,
            "passes": [s.to_json() for s in self.stats],
        }


class BudgetExhausted(Exception):
    """Raised inside a pass when the time budget is spent; the shrinker keeps what it has."""


@dataclass
class Shrinker:
    """Holds the current smallest graph; `consider` is the only place a candidate is accepted."""

    current: Graph
    seed: int
    is_same_bug: Callable[[Graph], bool]
    deadline: float
    suspects: tuple[str, ...] = ()
    stats: dict[str, PassStats] = field(default_factory=dict)
    active: str = ""
    checks: int = 0
    _seen: set[str] = field(default_factory=set)

    def consider(self, candidate: Graph | None) -> bool:
        if candidate is None or not candidate.nodes:  # a graph of no operator shows no converter's defect
            return False
        try:
            validate(candidate, REGISTRY)
        except GraphError:
            return False
        if not graph_size(candidate) < graph_size(self.current):
            return False
        key = candidate.dumps()
        if key in self._seen:
            return False
        self._seen.add(key)
        if time.monotonic() > self.deadline:
            raise BudgetExhausted
        stats = self.stats[self.active]
        stats.tries += 1
        self.checks += 1
        if not self.is_same_bug(candidate):
            return False
        stats.accepts += 1
        self.current = candidate
        return True

    def consider_retyped(self, candidate: Graph) -> bool:
        """For candidates whose shapes or attributes changed: types come from an eager run first."""
        if not graph_size(candidate) < graph_size(self.current):
            return False  # a cheap early exit; the real test is in consider
        retyped = retype(candidate, self.seed)
        return retyped is not None and self.consider(prune(retyped))


def reduce_graph(graph: Graph, seed: int, is_same_bug: Callable[[Graph], bool], budget_s: float = 60.0,
                 passes: Sequence[Pass] = PASSES, suspects: Sequence[str] = ()) -> ReduceResult:
    """Run `passes` to a fixpoint (or until `budget_s`), each candidate judged by `is_same_bug`; `suspects` are
    graph outputs likely to carry the bug, tried alone first."""
    start = time.monotonic()
    shrinker = Shrinker(graph, seed, is_same_bug, start + budget_s, tuple(suspects),
                        stats={p.__name__: PassStats(p.__name__) for p in passes})
    rounds, exhausted = 0, False
    try:
        progress = True
        while progress:
            rounds += 1
            before = graph_size(shrinker.current)
            for reduction_pass in passes:
                shrinker.active = reduction_pass.__name__
                t0 = time.monotonic()
                try:
                    reduction_pass(shrinker)
                finally:
                    shrinker.stats[shrinker.active].seconds += time.monotonic() - t0
            progress = graph_size(shrinker.current) < before
    except BudgetExhausted:
        exhausted = True
    return ReduceResult(shrinker.current, graph_size(graph), graph_size(shrinker.current),
                        tuple(shrinker.stats.values()), time.monotonic() - start, shrinker.checks, rounds, exhausted)
