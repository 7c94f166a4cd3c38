"""The reducer: passes over a concrete graph, run to a fixpoint, keeping only smaller graphs with the same bug.

One acceptance point (`Shrinker.consider`): a candidate is pruned, validated, and kept only when it is strictly
smaller in the size order (`graph_size`) and `is_same_bug` says it still shows the same signature. The passes
live in fuzzer/reduce_passes.py, listed once in PASSES; each keeps tries/accepts/seconds statistics.

The size order compares, in turn: operators, graph outputs, inputs plus weights, elements over all tensors,
ranks over all tensors, attribute magnitude, and input-value magnitude (see `graph_size`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzer.check.pipeline import CheckOptions, run_check
from fuzzer.reduce.passes import PASSES, Pass, attr_cost, prune, range_cost, retype, value_range
from fuzzer.support.device import require_device
from generators.ir import Graph, GraphError, validate
from generators.registry import REGISTRY

FULL_CHECK = CheckOptions()
REDUCE_CHECK = CheckOptions(rerun=False, locate=True, culprit=False)  # locate: the signature depends on it


def graph_size(graph: Graph) -> tuple[float, ...]:
    """The size order, compared lexicographically: a candidate must be strictly smaller to be accepted."""
    leaves = list(graph.inputs) + list(graph.weights)
    return (
        len(graph.nodes),
        len(graph.outputs),
        len(leaves),
        sum(t.numel for t in graph.types.values()),
        sum(t.rank for t in graph.types.values()),
        sum(attr_cost(v) for node in graph.nodes for v in node.attrs.values()),
        sum(range_cost(value_range(graph, n)) for n in leaves),
    )


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
    stats: dict[str, PassStats] = field(default_factory=dict)
    active: str = ""
    checks: int = 0
    _seen: set[str] = field(default_factory=set)

    def consider(self, candidate: Graph | None) -> bool:
        if candidate is None:
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
                 passes: Sequence[Pass] = PASSES) -> ReduceResult:
    """Run `passes` to a fixpoint (or until `budget_s`), each candidate judged by `is_same_bug`."""
    start = time.monotonic()
    shrinker = Shrinker(graph, seed, is_same_bug, start + budget_s,
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


def signature_oracle(seed: int, converter: str, options: Any, signature: str,
                     check_options: CheckOptions = REDUCE_CHECK, device: str = "cpu") -> Callable[[Graph], bool]:
    """is_same_bug for real converters: the candidate's verdict (on `device`) has exactly `signature`."""

    def is_same_bug(graph: Graph) -> bool:
        try:
            verdict = run_check(graph, seed, converter, options, check_options, device).verdict
        except Exception:  # a candidate that breaks convsmith itself is not the bug we are after
            return False
        return verdict.signature == signature

    return is_same_bug


# ---- the case-level wrapper ------------------------------------------------------------------------------

def case_log(result: Any) -> str:
    """log.txt of a case: the library's traceback (if it failed) and the per-stage timings."""
    parts = []
    if result.failure is not None:
        parts.append(f"stage: {result.failure.stage.value}\nframe: {result.failure.frame}\n\n"
                     f"{result.failure.traceback}")
    parts.append("timings (s):\n" + "\n".join(f"  {k}: {v:.4f}" for k, v in sorted(result.timings.items())))
    return "\n".join(parts) + "\n"


def case_from_check(graph: Graph, seed: int, converter: str, options: Any, original: str | None = None,
                    reduction: dict[str, Any] | None = None, case_id_: str | None = None,
                    check_options: CheckOptions = FULL_CHECK, device: str = "cpu") -> Any:
    """Run the full check on `graph` (on `device`) and package the result as a CaseData."""
    from fuzzer.cases.case import case_from_result, collect_versions, with_changes
    from fuzzer.converters import CONVERTERS

    result = run_check(graph, seed, converter, options, check_options, device)
    versions = collect_versions(CONVERTERS[converter].distributions)
    case = case_from_result(result, graph, seed, converter, versions, log=case_log(result), case_id_=case_id_,
                            original=original, device=device)
    return with_changes(case, reduction=reduction)


class ReductionFailed(RuntimeError):
    """The reduced graph no longer shows the case's signature under the full check (e.g. it became flaky)."""


def reduce_case(case: Any, budget_s: float = 60.0, original: str | None = None) -> tuple[Any, ReduceResult]:
    """Reduce a CaseData: the reduced case (id '<id>-reduced', linked to `original` or the case id) and stats."""
    require_device(case.device, f"{case.id} (found on {case.device})")
    oracle = signature_oracle(case.seed, case.converter, case.converter_options, case.signature,
                              device=case.device)
    result = reduce_graph(case.graph, case.seed, oracle, budget_s)
    reduced = case_from_check(result.graph, case.seed, case.converter, case.converter_options,
                              original=original or case.id, reduction=result.to_json(),
                              case_id_=reduced_id(case.id), device=case.device)
    if reduced.signature != case.signature:
        raise ReductionFailed(f"{case.id}: the reduced graph gives {reduced.signature} under the full check, "
                              f"not {case.signature}")
    return reduced, result


def reduced_id(case_id: str) -> str:
    return case_id if case_id.endswith("-reduced") else f"{case_id[:150]}-reduced"
