"""Spending the budget on what is new: (operator, dtype) pairs behind a bug already hit often are generated less.

A third of a campaign's tests used to rediscover the same few root causes. The campaign counts the hits of each bug
signature and keeps the (operator, dtype) pairs common to every graph that hit it: after HITS_TO_DEMOTE hits
(HITS_TO_DEMOTE_LOST when the tests killed their worker) that set narrows to the culprit (a few pairs at most, else
it says nothing and is ignored). A bug whose tests name the operator it is filed under is recorded with that
operator's pairs alone and demoted after HITS_TO_DEMOTE_LOCALIZED hits. A bug of an operator in any dtype (torch's
TorchScript export of a circular pad aborts for float32, float64 and bfloat16 alike) leaves no pair in common: then
the operators every hitting graph held name it, and the pairs of those operators the hits held are demoted. Features
an operator declares (OpSpec.features: a padding mode at a rank, shared by the pads and the convolutions that pad)
count as pairs (FEATURE, feature), so a bug of a feature in any operator and dtype is named by it. Each later unit
then leaves each demoted pair out of its graph with probability AVOID_PROBABILITY (AVOID_PROBABILITY_LOST for the
culprit of a worker's death), drawn from the unit's seed, so the pair is still tested now and then (a second bug on
it stays reachable) and a unit stays a pure function of its seed, its config and the demoted pairs it was sent.

A demoted pair still reaches every converter in the graphs that keep it, and a converter that fails on the culprit
of a filed bug tells nothing about the rest of such a graph. So a bug whose hits name their culprit operator is also
sent, from its first hit, as (AVOID_FOR + converter, operator): that converter then tests each graph holding the
operator with it cut out first (culprit_cut.avoided_culprits), with probability AVOID_PROBABILITY_CULPRIT, while the
other converters test the graph whole. A bug whose hits name no culprit, because the operator at fault is an ONNX
one that several graph operators emit, gets the few graph operators that cover its hits cut out instead (spread.py),
or, where a graph trait no operator names covers them (a bfloat16 input, traits.py), that converter's tests of graphs
holding it skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fuzzer.campaign.policy.spread import MIN_TRAIT_PRECISION, SpreadTally
from fuzzer.campaign.policy.traits import TRAIT, trait_token
from fuzzer.support.chance import seeded_chance
from generators.generator import GenOptions

DEMOTED_META = "demoted_pairs"  # the campaign's meta key: the pairs generated less, kept for status and a resume
NOVELTY_META = "novelty"  # the hits behind them, so that a resumed campaign goes on counting (Novelty.tally)
HITS_TO_DEMOTE = 3
# A bug whose tests name the operator it is filed under (culprit_cut.culprit_operator) has its culprit from the first
# hit: the second confirms that it recurs.
HITS_TO_DEMOTE_LOCALIZED = 2
# A test that kills its worker costs a restart and a cold feeder, five to ten tests' time: its culprit is demoted
# sooner. Now that a heap corruption is one signature (fuzzer/support/faults.py), two hits are enough to narrow to it.
HITS_TO_DEMOTE_LOST = 2
MAX_CULPRIT_PAIRS = 3  # a signature whose hits share more pairs than this names no culprit
AVOID_PROBABILITY = 0.8
# The culprit of a bug that kills its worker is left out of more graphs: each test of it costs a restart, and a test
# in twenty still shows within minutes whether it was fixed.
AVOID_PROBABILITY_LOST = 0.95
# A demoted setting leaves the graph tested (at the opset that allows the type), so it is applied nearly always
# (docs/policy.md has the measurement that chose it, and the other tuned constants of what a worker tests).
AVOID_PROBABILITY_SETTING = 0.95
# A culprit cut out for its own converter costs the other converters nothing, so it is cut nearly always; one graph
# in ten still shows whether the bug was fixed.
AVOID_PROBABILITY_CULPRIT = 0.9
# And it is cut from the first hit that names it, before a second confirms it recurs (HITS_TO_DEMOTE_LOCALIZED, for
# the generator's pairs, which every converter loses): waiting for that confirmation costs its converter one more test
# ending in the filed bug per culprit, and a culprit wrongly named is refuted when its bug comes back without it.
HITS_TO_CUT_CULPRIT = 1

# (operator, dtype), (FEATURE, an OpSpec feature such as 'pad:circular:rank3:dims2') or (TRAIT, a graph trait such as
# 'input:bfloat16', traits.py)
Pair = tuple[str, str]
FEATURE = "feature"
SETTING = "setting"  # a root cause a converter setting avoids (settings.py): not a generator pair
RAISE_ONLY = "raise-only"  # appended to a setting's detail where it may raise the opset but not skip (settings.py)
BOOST = "boost"  # an operator drawn more often (steering.py): travels with the demotions
STEER = "steer"  # a (rewrite, class) pair some units are steered to (class_steering.py): travels with them too
AVOID_FOR = "avoid-for:"  # + a converter: the culprit operator of a bug of it, cut out before that converter runs
Demotion = tuple[str, str, float]  # a demoted pair and the probability that a graph leaves it out


@dataclass
class Novelty:
    """The campaign's tally: per signature, its hits and the pairs every hitting graph held."""

    hits: dict[str, int] = field(default_factory=dict)
    common: dict[str, frozenset[Pair]] = field(default_factory=dict)
    common_ops: dict[str, frozenset[str]] = field(default_factory=dict)  # the operators every hitting graph held
    held: dict[str, frozenset[Pair]] = field(default_factory=dict)  # pairs of those operators the hits held
    lost: set[str] = field(default_factory=set)  # signatures whose tests killed (or hung) the worker
    localized: set[str] = field(default_factory=set)  # signatures recorded with the pairs of their operator alone
    earlier: frozenset[Pair] = frozenset()  # demoted by the sessions before this one (a resumed campaign)
    # Hits of each root cause a setting avoids (fuzzer/campaign/policy/settings.py), by its detail.
    settings: dict[str, int] = field(default_factory=dict)
    # The (converter, operator) a localized signature's hits named as their culprit.
    culprits: dict[str, tuple[str, str]] = field(default_factory=dict)
    spread: SpreadTally = field(default_factory=SpreadTally)  # the hits that named no culprit, sampled
    # (signature, converter, operator): a culprit its bug survived being cut out of (the reduced case's operator,
    # where the bug is the graph's or the model's as a whole), never again taken for the bug's culprit.
    refuted: set[tuple[str, str, str]] = field(default_factory=set)
    _demotions: list[Demotion] | None = None  # recomputed after a signature past the mark changes

    def record(self, signature: str, pairs: Iterable[Pair], lost_worker: bool = False, localized: bool = False,
               culprit: tuple[str, str] | None = None) -> None:
        """One more bug test of `signature` on a graph holding `pairs`; `lost_worker`: the test killed its worker;
        `localized`: `pairs` are those of the operator the bug is filed under, not the whole graph's, and `culprit`
        the (converter, operator) they name (converter, "" where the hit named none)."""
        if lost_worker:
            self.lost.add(signature)
        if localized:
            self.localized.add(signature)
            if culprit is not None and self.culprits.get(signature) != culprit:
                self.culprits[signature] = culprit
                self._demotions = None
        given = frozenset(tuple(p) for p in pairs)
        held = frozenset(p for p in given if p[0] != TRAIT)  # a trait is no pair to generate less: covers alone take it
        ops = frozenset(op for op, _ in held if op != FEATURE)  # a feature names itself, never through an operator
        sampled = not localized and culprit is not None and self.spread.sample(signature, culprit[0],
                                                                                ops | _trait_tokens(given))
        before = (self.common.get(signature), self.common_ops.get(signature))
        self.hits[signature] = self.hits.get(signature, 0) + 1
        self.common[signature] = before[0] & held if before[0] is not None else held
        self.common_ops[signature] = before[1] & ops if before[1] is not None else ops
        common_ops = self.common_ops[signature]  # only shrinks: the pairs of other operators are not kept
        self.held[signature] = frozenset(p for p in self.held.get(signature, frozenset()) | held if p[0] in common_ops)
        after = (self.common[signature], self.common_ops[signature])
        mark = self.mark(signature)
        # A trait's share of hits is weighed against its tests (spread.MIN_TRAIT_PRECISION), so a sampled signature's
        # cover is weighed again as its hits double.
        recount = signature in self.spread.samples and self.hits[signature] & (self.hits[signature] - 1) == 0
        if self.hits[signature] >= mark and (before != after or self.hits[signature] == mark or sampled or recount):
            self._demotions = None

    def refute(self, signature: str, converter: str, operator: str) -> None:
        """`signature`'s bug came back with `operator` cut out of the graph: it is not the culprit, and what was
        narrowed to it is dropped, so that the next hits are sampled whole (spread.py)."""
        self.refuted.add((signature, converter, operator))
        if self.culprits.get(signature) == (converter, operator):
            del self.culprits[signature]
        if signature in self.localized:
            self.localized.discard(signature)
            for narrowed in (self.common, self.common_ops, self.held):
                narrowed.pop(signature, None)
        self._demotions = None

    def is_refuted(self, signature: str, converter: str, operator: str) -> bool:
        """Whether `operator` was cut out of a graph whose `converter` test then hit `signature` again."""
        return (signature, converter, operator) in self.refuted

    def seen(self, converter: str, pairs: Iterable[Pair], known: bool = False) -> None:
        """One more test of `converter` on a graph holding `pairs` (hit or not; `known`: it ended in a bug already
        filed): the base rates spread.py compares a bug's hits with."""
        pairs = list(pairs)
        self.spread.seen(converter, {op for op, _ in pairs if op not in (FEATURE, TRAIT)} | _trait_tokens(pairs),
                         known)

    def record_setting(self, detail: str) -> None:
        """One more bug test of a root cause a converter setting avoids (settings.setting_detail)."""
        self.settings[detail] = self.settings.get(detail, 0) + 1
        if self.settings[detail] >= HITS_TO_DEMOTE:  # its precision moves with each hit (setting_demotion)
            self._demotions = None

    def setting_demotion(self, detail: str) -> str:
        """The detail a demoted setting travels with: RAISE_ONLY appended unless its hits are at least
        MIN_TRAIT_PRECISION of its converter's tests of graphs holding its dtype (settings.py: only then may it
        skip the tests no opset allows)."""
        converter, dtype, _ = detail.split("|")
        holding = self.spread.held.get(converter, {}).get(trait_token(f"dtype:{dtype}"), 0)
        return detail if self.settings[detail] >= MIN_TRAIT_PRECISION * holding else f"{detail}|{RAISE_ONLY}"

    def mark(self, signature: str) -> int:
        """The hits after which the culprit of `signature` is demoted."""
        if signature in self.lost:
            return HITS_TO_DEMOTE_LOST
        return HITS_TO_DEMOTE_LOCALIZED if signature in self.localized else HITS_TO_DEMOTE

    def tally(self) -> dict[str, Any]:
        """What a resumed campaign needs to go on counting (JSON): the hits and the sets each signature narrowed to."""
        def pairs(sets: dict[str, frozenset[Pair]]) -> dict[str, list[list[str]]]:
            return {sig: sorted(map(list, value)) for sig, value in sets.items()}

        return {"hits": dict(self.hits), "common": pairs(self.common), "held": pairs(self.held),
                "common_ops": {sig: sorted(ops) for sig, ops in self.common_ops.items()}, "lost": sorted(self.lost),
                "localized": sorted(self.localized), "settings": dict(self.settings),
                "culprits": {sig: list(pair) for sig, pair in self.culprits.items()}, "spread": self.spread.to_json(),
                "refuted": sorted(map(list, self.refuted))}

    @classmethod
    def from_tally(cls, tally: dict[str, Any] | None, earlier: Iterable[Pair] = ()) -> Novelty:
        """The tally of the sessions before (`tally()`'s JSON; None for a new campaign)."""
        def pairs(sets: dict[str, list[list[str]]]) -> dict[str, frozenset[Pair]]:
            return {sig: frozenset((op, detail) for op, detail in value) for sig, value in sets.items()}

        earlier_set = frozenset((op, detail) for op, detail in earlier)
        if not tally:
            return cls(earlier=earlier_set)
        return cls(hits=dict(tally["hits"]), common=pairs(tally["common"]), held=pairs(tally["held"]),
                   common_ops={sig: frozenset(ops) for sig, ops in tally["common_ops"].items()},
                   lost=set(tally.get("lost", ())), localized=set(tally.get("localized", ())), earlier=earlier_set,
                   settings=dict(tally.get("settings", {})),
                   culprits={sig: (conv, op) for sig, (conv, op) in tally.get("culprits", {}).items()},
                   spread=SpreadTally.from_json(tally.get("spread")),
                   refuted={(sig, conv, op) for sig, conv, op in tally.get("refuted", ())})

    def demoted(self) -> list[Pair]:
        """The pairs to generate less, sorted: the culprits of signatures hit often enough (mark); the operators
        avoided for one converter apart (they come back from the tally's culprits)."""
        return [(op, detail) for op, detail, _ in self.demotions() if not op.startswith(AVOID_FOR)]

    def avoided(self) -> list[tuple[str, str]]:
        """The (converter, operator) culprits cut out before their converter runs, sorted."""
        return [(op.removeprefix(AVOID_FOR), detail) for op, detail, _ in self.demotions() if op.startswith(AVOID_FOR)]

    def demotions(self) -> list[Demotion]:
        """Each demoted pair, sorted, with the probability a graph leaves it out: AVOID_PROBABILITY_LOST for the
        culprits of signatures whose tests killed their worker, AVOID_PROBABILITY for the rest."""
        if self._demotions is None:
            out: set[Pair] = set(self.earlier)
            lost: set[Pair] = set()
            for signature, count in self.hits.items():
                if count >= self.mark(signature):
                    culprit = self.culprit(signature)
                    out |= culprit
                    lost |= culprit if signature in self.lost else set()
            out |= {(SETTING, self.setting_demotion(detail)) for detail, count in self.settings.items()
                    if count >= HITS_TO_DEMOTE}
            avoid = {(AVOID_FOR + converter, operator) for signature, (converter, operator) in self.culprits.items()
                     if self.hits.get(signature, 0) >= HITS_TO_CUT_CULPRIT}
            avoid |= self._covers()
            self._demotions = [(op, detail, AVOID_PROBABILITY_SETTING if op == SETTING else AVOID_PROBABILITY_CULPRIT
                                if op.startswith(AVOID_FOR) else AVOID_PROBABILITY_LOST if (op, detail) in lost
                                else AVOID_PROBABILITY) for op, detail in sorted(out | avoid)]
        return self._demotions

    def _covers(self) -> set[Pair]:
        """(AVOID_FOR + converter, operator) for the operators that cover the hits that named no culprit, of each
        signature past its mark whose pairs narrow to none (spread.py); a localized bug's cover joins its culprit."""
        out: set[Pair] = set()
        for signature in self.spread.samples:
            if self.hits.get(signature, 0) < self.mark(signature) or self.culprit(signature):
                continue
            found = self.spread.cover(signature, self.hits[signature])
            if found is not None:
                out |= {(AVOID_FOR + found[0], op) for op in found[1]}
        return out

    def culprit(self, signature: str) -> frozenset[Pair]:
        """The pairs behind `signature`: those every hitting graph held, else the held pairs of the operators every
        hitting graph held; empty when neither narrows to MAX_CULPRIT_PAIRS or fewer."""
        pairs = self.common.get(signature, frozenset())
        if 0 < len(pairs) <= MAX_CULPRIT_PAIRS:
            return pairs
        ops = self.common_ops.get(signature, frozenset())
        if pairs or not 0 < len(ops) <= MAX_CULPRIT_PAIRS:
            return frozenset()
        return self.held[signature]  # already only the pairs of those operators


def _trait_tokens(pairs: Iterable[Pair]) -> frozenset[str]:
    """The spread tally's tokens of the (TRAIT, trait) pairs among `pairs`."""
    return frozenset(trait_token(detail) for op, detail in pairs if op == TRAIT)


def without_demoted(options: GenOptions, seed: int, demoted: Iterable[Pair | Demotion]) -> GenOptions:
    """`options` with each demoted pair avoided in the graph of `seed` with its probability (a Demotion's, else
    AVOID_PROBABILITY), and the boosted operators drawn more often."""
    demoted = list(demoted)
    boosted = frozenset(detail for op, detail, *_ in demoted if op == BOOST)
    if boosted:
        options = dataclasses.replace(options, boosted_ops=options.boosted_ops | boosted)
    dropped = {(op, detail) for op, detail, *chance in demoted
               if op not in (SETTING, BOOST, STEER) and not op.startswith(AVOID_FOR)
               and seeded_chance(f"demote:{seed}:{op}:{detail}") < (chance or [AVOID_PROBABILITY])[0]}
    if not dropped:
        return options
    features = frozenset(detail for op, detail in dropped if op == FEATURE)
    return dataclasses.replace(options, demoted_pairs=options.demoted_pairs | {p for p in dropped if p[0] != FEATURE},
                               avoid_features=options.avoid_features | features)
