"""Spending the budget on what is new: (operator, dtype) pairs behind a bug already hit often are generated less.

A third of a campaign's tests used to rediscover the same few root causes. The campaign counts the hits of each
bug signature and keeps the (operator, dtype) pairs common to every graph that hit it: after HITS_TO_DEMOTE hits
that set narrows to the culprit (a few pairs at most, else it says nothing and is ignored). Each later unit then
leaves each demoted pair out of its graph with probability AVOID_PROBABILITY, drawn from the unit's seed, so the
pair is still tested now and then (a second bug on it stays reachable) and a unit stays a pure function of its
seed, its config and the demoted pairs it was sent.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from generators.generator import GenOptions

HITS_TO_DEMOTE = 5
MAX_CULPRIT_PAIRS = 3  # a signature whose hits share more pairs than this names no culprit
AVOID_PROBABILITY = 0.8

Pair = tuple[str, str]


@dataclass
class Novelty:
    """The campaign's tally: per signature, its hits and the pairs every hitting graph held."""

    hits: dict[str, int] = field(default_factory=dict)
    common: dict[str, frozenset[Pair]] = field(default_factory=dict)
    earlier: frozenset[Pair] = frozenset()  # demoted by the sessions before this one (a resumed campaign)
    _demoted: list[Pair] | None = None  # recomputed after a signature past the mark changes

    def record(self, signature: str, pairs: Iterable[Pair]) -> None:
        """One more bug test of `signature` on a graph holding `pairs`."""
        held = frozenset(tuple(p) for p in pairs)
        before = self.common.get(signature)
        self.hits[signature] = self.hits.get(signature, 0) + 1
        self.common[signature] = before & held if before is not None else held
        if self.hits[signature] >= HITS_TO_DEMOTE and (before != self.common[signature] or
                                                       self.hits[signature] == HITS_TO_DEMOTE):
            self._demoted = None

    def demoted(self) -> list[Pair]:
        """The pairs to generate less, sorted: the culprits of signatures hit HITS_TO_DEMOTE times or more."""
        if self._demoted is None:
            out: set[Pair] = set(self.earlier)
            for signature, count in self.hits.items():
                culprit = self.common[signature]
                if count >= HITS_TO_DEMOTE and 0 < len(culprit) <= MAX_CULPRIT_PAIRS:
                    out |= culprit
            self._demoted = sorted(out)
        return self._demoted


def without_demoted(options: GenOptions, seed: int, demoted: Iterable[Pair]) -> GenOptions:
    """`options` with each demoted pair avoided in the graph of `seed` with probability AVOID_PROBABILITY."""
    dropped = {tuple(pair) for pair in demoted
               if random.Random(f"demote:{seed}:{pair[0]}:{pair[1]}").random() < AVOID_PROBABILITY}
    if not dropped:
        return options
    return dataclasses.replace(options, avoid_pairs=options.avoid_pairs | frozenset(dropped))
