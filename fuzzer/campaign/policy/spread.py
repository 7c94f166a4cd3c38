"""A root cause spread over several operators: the few operators that cover its hits, cut out for its converter.

Many graph operators lower to the same ONNX operator, and a converter that takes ONNX fails on that operator
whichever graph operator emitted it: onnx2tf's IsInf after `isinf`, `isfinite` or `nan_to_num`, its circular pad
after `pad_circular` or a circular `conv1d`, the TorchScript exporter's Transpose after `permute` or `movedim`. The
error names the ONNX operator, which maps back to no single graph operator, so such a hit names no culprit, no pair
is common to the hits, and (operator, dtype) demotion never narrows to it: in an hour, onnx2tf spent a sixth of its
tests on root causes already filed, most of them of this kind.

So the campaign keeps, per signature, the operators of the first hits that named no culprit, and counts how many
of each converter's tests held each operator. Once the signature is hit often enough, a greedy cover picks at most
MAX_COVER_OPS operators that together were in nearly every sampled hit, each far more common in the hits than in
that converter's tests (MIN_LIFT): those are cut out before that converter runs (novelty.AVOID_FOR), like the
culprit of a localized bug. A root cause that no few operators cover (onnx2tf's failure on any reduction in a graph
that also holds a Constant node) gets no cover, rather than one that cuts half the graph. Graph traits (a bfloat16
input, a scalar input, traits.py) are candidates beside the operators; a trait cannot be cut out, so a cover that
takes one skips that converter's tests of graphs holding it, and takes it only where most of those tests hit the bug
(MIN_TRAIT_PRECISION; a test that ended in another filed bug counts with them: skipping it loses nothing new): a
dtype anywhere in the graph, held by a sixth to a quarter of the converter's tests, nearly all of which passed, is
no cover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzer.campaign.policy.traits import is_trait

SAMPLES = 12  # hits kept per signature: enough to tell the operators behind it from those that came along
MIN_SAMPLES = 5
MIN_HITS_HELD = 2  # a cover operator is in at least this many sampled hits: one hit is no evidence
MAX_COVER_OPS = 4
MIN_COVERED = 0.9  # the share of sampled hits the cover must hold: a stray hit of another cause does not veto it
# How much more often a cover operator is held by the hits than by the converter's tests: `add`, in a third of all
# graphs, is no culprit for being in a third of the hits, nor in all of them (an operator common to every hit is
# novelty's own culprit).
MIN_LIFT = 3.0
# A trait (traits.py) cannot be cut out: its converter's tests of graphs holding it are skipped. So it covers only
# where at least this share of those tests hit the bug (docs/policy.md: the case that showed the need).
MIN_TRAIT_PRECISION = 0.5


@dataclass
class SpreadTally:
    """The sampled operator sets of hits that named no culprit, and how many tests of each converter held each
    operator."""

    samples: dict[str, tuple[str, list[frozenset[str]]]] = field(default_factory=dict)  # sig: (converter, op sets)
    tests: dict[str, int] = field(default_factory=dict)  # per converter
    held: dict[str, dict[str, int]] = field(default_factory=dict)  # per converter, per operator: tests holding it
    # Per converter, per operator: those of its tests holding it that ended in a bug already filed.
    spent: dict[str, dict[str, int]] = field(default_factory=dict)
    # Each signature's cover as of its last sample and hit count: the base rates move with every test, a cover only
    # with a sample or (for a trait's precision) the hits.
    _covers: dict[str, tuple[int, tuple[str, frozenset[str]] | None]] = field(default_factory=dict, repr=False)

    def seen(self, converter: str, ops: Iterable[str], known: bool = False) -> None:
        """One more test of `converter` on a graph holding `ops`; `known`: it ended in a bug already filed."""
        self.tests[converter] = self.tests.get(converter, 0) + 1
        counts = self.held.setdefault(converter, {})
        spent = self.spent.setdefault(converter, {}) if known else {}
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
            if known:
                spent[op] = spent.get(op, 0) + 1

    def sample(self, signature: str, converter: str, ops: Iterable[str]) -> bool:
        """Keep the operators of one more hit of `signature` that named no culprit; True when it was kept."""
        _, kept = self.samples.setdefault(signature, (converter, []))
        if len(kept) >= SAMPLES:
            return False
        kept.append(frozenset(ops))
        self._covers.pop(signature, None)
        return True

    def cover(self, signature: str, hits: int = 0) -> tuple[str, frozenset[str]] | None:
        """(converter, the operators and traits that cover `signature`'s sampled hits, of its `hits` in all); None
        while too few are sampled or no small cover of operators far more common in the hits than in the converter's
        tests exists."""
        cached = self._covers.get(signature)
        if cached is None or cached[0] != hits:
            converter, sampled = self.samples.get(signature, ("", []))
            found = (greedy_cover(sampled, self._candidates(converter, sampled, hits), self.held.get(converter, {}))
                     if len(sampled) >= MIN_SAMPLES else frozenset())
            self._covers[signature] = cached = (hits, (converter, found) if found else None)
        return cached[1]

    def _candidates(self, converter: str, sampled: Sequence[frozenset[str]], hits: int) -> list[str]:
        """The operators and traits in MIN_HITS_HELD or more of the sampled hits, held by them at least MIN_LIFT
        times as often as by the converter's tests; a trait only where its tests hit the bug (of `hits` in all), or
        another bug already filed, often enough (MIN_TRAIT_PRECISION)."""
        tests, held = max(self.tests.get(converter, 0), 1), self.held.get(converter, {})
        spent = self.spent.get(converter, {})
        counts: dict[str, int] = {}
        for ops in sampled:
            for op in ops:
                counts[op] = counts.get(op, 0) + 1

        def precise(token: str, n: int) -> bool:
            # A test skipped that would have ended in any filed bug costs nothing new, whichever bug it would be.
            ended_known = max(hits * n / len(sampled), spent.get(token, 0))
            return not is_trait(token) or ended_known >= MIN_TRAIT_PRECISION * held.get(token, 0)

        return sorted(op for op, n in counts.items()
                      if n >= MIN_HITS_HELD and n / len(sampled) >= MIN_LIFT * held.get(op, 0) / tests
                      and precise(op, n))

    def to_json(self) -> dict[str, Any]:
        """The tally as JSON, for the campaign's meta table (novelty.tally) and a resume."""
        return {"samples": {sig: [conv, [sorted(ops) for ops in hits]] for sig, (conv, hits) in self.samples.items()},
                "tests": dict(self.tests), "held": {conv: dict(ops) for conv, ops in self.held.items()},
                "spent": {conv: dict(ops) for conv, ops in self.spent.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SpreadTally:
        """The tally `to_json` wrote; an empty one for None (a campaign from before covers)."""
        if not data:
            return cls()
        return cls(samples={sig: (conv, [frozenset(ops) for ops in hits])
                            for sig, (conv, hits) in data.get("samples", {}).items()},
                   tests=dict(data.get("tests", {})),
                   held={conv: dict(ops) for conv, ops in data.get("held", {}).items()},
                   spent={conv: dict(ops) for conv, ops in data.get("spent", {}).items()})


def greedy_cover(hits: Sequence[frozenset[str]], candidates: Iterable[str], held: Mapping[str, int] | None = None
                 ) -> frozenset[str]:
    """At most MAX_COVER_OPS of `candidates` that together are in at least MIN_COVERED of `hits`, each taken for the
    most hits it adds, of equals the one `held` by the fewest of the converter's tests (it skips or cuts least: a
    bfloat16 input of the model it is given before one of the graph), then the first by name; empty when none that
    small exists."""
    held = held or {}
    left, chosen, pool = list(hits), set[str](), sorted(candidates)
    spared = int(len(hits) * (1 - MIN_COVERED) + 1e-9)  # hits the cover may leave out
    while len(left) > spared:
        if len(chosen) == MAX_COVER_OPS or not pool:
            return frozenset()
        best = max(pool, key=lambda op: (sum(op in ops for ops in left), -held.get(op, 0)))  # the first of equals
        if not any(best in ops for ops in left):
            return frozenset()
        chosen.add(best)
        pool.remove(best)
        left = [ops for ops in left if best not in ops]
    return frozenset(chosen)
