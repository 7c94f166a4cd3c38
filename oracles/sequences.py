"""Operator sequences over-represented in failing graphs: the study found that diverging models share them.

A graph's sequences are its operator pairs (a producer and a consumer) and triples (a path of three). Each
sequence gets a one-sided Fisher exact test: is it in more failing graphs than its share of all graphs explains?
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

SEPARATOR = " > "


class OpGraph(Protocol):
    """What the analysis reads of a graph (generators.ir.Graph, without importing torch here)."""

    nodes: Sequence[Any]  # each with .op and .inputs

    def producer(self) -> Mapping[str, Any]: ...


def graph_sequences(graph: OpGraph) -> frozenset[str]:
    """'conv2d > relu' for every producer -> consumer edge, 'conv2d > relu > add' for every path of three."""
    producer = graph.producer()
    index = {id(node): i for i, node in enumerate(graph.nodes)}
    parents = [[index[id(producer[n])] for n in node.inputs if n in producer] for node in graph.nodes]
    ops = [node.op for node in graph.nodes]
    pairs = {(ops[p], ops[i]) for i in range(len(ops)) for p in parents[i]}
    triples = {(ops[g], ops[p], ops[i]) for i in range(len(ops)) for p in parents[i] for g in parents[p]}
    return frozenset(SEPARATOR.join(s) for s in (*pairs, *triples))


@dataclass(frozen=True)
class Enrichment:
    """One sequence: in how many failing and passing graphs it appears, the odds ratio and the p-value."""

    sequence: str
    failing: int
    passing: int
    failing_total: int
    passing_total: int
    odds_ratio: float
    p_value: float


def fisher_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided Fisher exact p-value of the table [[a, b], [c, d]] having at least `a` in its top-left cell."""
    row, col, total = a + b, a + c, a + b + c + d
    low, top = max(0, col - (total - row)), min(row, col)
    mode = (row + 1) * (col + 1) // (total + 2)
    # The hypergeometric terms are summed from `a` away from the mode, so that they only fall and the sum stops
    # once the rest is negligible: a week's campaign has tables of millions, whose binomial coefficients as
    # integers took seconds per sequence. Below the mode, the p-value is one less the lower tail.
    if a > mode:
        return min(1.0, math.exp(_log_tail(a, top, row, col, total, up=True)))
    if a <= low:
        return 1.0
    return max(0.0, 1.0 - math.exp(_log_tail(a - 1, low, row, col, total, up=False)))


def _log_tail(start: int, end: int, row: int, col: int, total: int, up: bool) -> float:
    """log of the hypergeometric probabilities summed from `start` to `end` (falling terms), in log space."""
    log_term = _log_comb(row, start) + _log_comb(total - row, col - start) - _log_comb(total, col)
    log_sum = log_term
    k = start
    while k != end:
        ratio = ((row - k) * (col - k) / ((k + 1) * (total - row - col + k + 1)) if up
                 else k * (total - row - col + k) / ((row - k + 1) * (col - k + 1)))
        if ratio <= 0.0:
            break
        log_term += math.log(ratio)
        log_sum = max(log_sum, log_term) + math.log1p(math.exp(-abs(log_sum - log_term)))
        if log_term < log_sum - 40.0:  # the rest adds under 1e-17 of the sum
            break
        k += 1 if up else -1
    return log_sum


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def enrichment(graphs: Iterable[tuple[Iterable[str], bool]], min_failing: int = 2) -> list[Enrichment]:
    """Every sequence seen in at least `min_failing` failing graphs, most significant first (then the largest
    odds ratio, then by name)."""
    counts: dict[str, list[int]] = {}
    n_fail = n_pass = 0
    for sequences, failed in graphs:
        n_fail, n_pass = n_fail + int(failed), n_pass + int(not failed)
        for seq in set(sequences):
            counts.setdefault(seq, [0, 0])[0 if failed else 1] += 1
    return enrichment_of_counts({seq: (a, c) for seq, (a, c) in counts.items()}, n_fail, n_pass, min_failing)


def enrichment_of_counts(counts: Mapping[str, tuple[int, int]], n_fail: int, n_pass: int,
                         min_failing: int = 2) -> list[Enrichment]:
    """enrichment() from counts: per sequence, the failing and the passing graphs that have it, of n_fail and
    n_pass graphs in all."""
    rows = []
    for seq, (a, c) in counts.items():
        if a < min_failing:
            continue
        b, d = n_fail - a, n_pass - c
        odds = (a + 0.5) * (d + 0.5) / ((b + 0.5) * (c + 0.5))  # Haldane's correction: no division by zero
        rows.append(Enrichment(seq, a, c, n_fail, n_pass, odds, fisher_greater(a, b, c, d)))
    return sorted(rows, key=lambda r: (r.p_value, -r.odds_ratio, r.sequence))


def top(rows: Sequence[Enrichment], count: int = 20, alpha: float = 0.05) -> list[Enrichment]:
    """The first `count` rows significant at `alpha` (no correction: a pointer for people, not a proof)."""
    return [r for r in rows if r.p_value <= alpha][:count]
