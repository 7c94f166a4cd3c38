"""Generation steered to (rewrite, edge-case class) pairs never fired: a rewrite seen to fire in some classes but not
in a class the generator can choose (a dtype) becomes a target. STEER_SHARE of the units (by seed) are
steered to one target each: the graph's dtypes narrowed to the class's dtype, and the
pattern operators built for the rewrite (generators/ops/patterns.py) drawn more often, with the operators written
with the ONNX operators the rewrite was seen to match (OpSpec.onnx_core). A target travels with the
demotions as (STEER, "converter|rewrite|class|pattern,...", 1.0), so a unit stays a pure function of what it was
sent; its tests record it (TestResult.steered) and the database counts each attempt at the pair, whether the tool's
rewrites ran (class_attempts). A pair none of LEARNED_AFTER attempts reached is learned unreachable and dropped, as
are pairs the operators the rewrite matched cannot meet (class_coverage.py)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fuzzer.campaign.class_coverage import LEARNED_AFTER, attempts, class_counts, unreachable_for_ops
from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.policy.novelty import STEER, Demotion
from fuzzer.campaign.policy.steering import tool_converters
from fuzzer.campaign.result import TestResult
from fuzzer.converters.edge_classes import OP_PREFIX
from generators.dtypes import DType
from generators.generator import GenOptions
from generators.ops.patterns import Pattern
from generators.registry import REGISTRY, OpRegistry

STEER_SHARE = 0.3  # of the units, while targets are left, those steered to one
MAX_TARGETS = 400  # targets sent with the demotions (the first by converter, rewrite and class)
MAX_CORE_OPS = 6  # operators drawn more often for a target for the ONNX operators its rewrite matched
Lever = Callable[[GenOptions], GenOptions | None]  # the options that make a class likely; None where it cannot


def _dtype_lever(dtype: DType) -> Lever:
    def lever(opts: GenOptions) -> GenOptions | None:
        return dataclasses.replace(opts, dtypes=(dtype,)) if dtype in opts.dtypes else None
    return lever


# The classes the generator's options can choose; the rest (ranks, constants at their limits, a second consumer, a
# body) come from what the graph holds, and are not steered to. Ranks were a lever (max_rank=1) until operators
# that need rank 2 or more made generation fail on it.
LEVERS: Mapping[str, Lever] = {d.value: _dtype_lever(d) for d in DType}


@dataclass(frozen=True)
class Target:
    """One (converter, rewrite, class) pair steered to, and the operators drawn more often for it (the patterns built
    for the rewrite, the operators written with the ONNX operators it matched)."""

    converter: str
    rewrite: str
    cls: str
    patterns: tuple[str, ...] = ()

    def detail(self) -> str:
        return f"{self.converter}|{self.rewrite}|{self.cls}|{','.join(self.patterns)}"

    @classmethod
    def of_detail(cls, detail: str) -> Target:
        converter, rewrite, klass, patterns = (detail.split("|", 3) + ["", "", ""])[:4]
        return cls(converter, rewrite, klass, tuple(p for p in patterns.split(",") if p))


def steered_target(seed: int, demoted: Sequence[Demotion]) -> Target | None:
    """The target the unit of `seed` is steered to under `demoted`, None for the units not steered."""
    targets = [detail for op, detail, *_ in demoted if op == STEER]
    rng = random.Random(f"steer:{seed}")
    if not targets or rng.random() >= STEER_SHARE:
        return None
    return Target.of_detail(targets[rng.randrange(len(targets))])


def steered_key(seed: int, demoted: Sequence[Demotion]) -> str:
    """How the tests of the unit of `seed` record the target it was steered to ("" for none)."""
    target = steered_target(seed, demoted)
    return target.detail() if target is not None else ""


def steered_options(opts: GenOptions, target: Target | None) -> GenOptions:
    """`opts` steered to `target`: its class's lever, and its patterns drawn more often (as they are, where the
    lever cannot apply)."""
    if target is None:
        return opts
    lever = LEVERS.get(target.cls)
    steered = (lever(opts) if lever is not None else None) or opts
    return dataclasses.replace(steered, boosted_ops=steered.boosted_ops | frozenset(target.patterns))


@dataclass
class ClassSteering:
    """The campaign's (converter, rewrite, class) pairs fired, the operators each rewrite matched, and the attempts
    at each target; the targets they leave."""

    fired: set[tuple[str, str, str]] = field(default_factory=set)
    ops: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    tried: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    reached: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    registry: OpRegistry = REGISTRY
    tools: Mapping[str, str] = field(default_factory=tool_converters)
    _targets: list[Demotion] | None = None

    @classmethod
    def from_db(cls, db: CampaignDB) -> ClassSteering:
        """What the sessions before fired and tried (a resumed campaign)."""
        steering = cls()
        for converter, pairs in class_counts(db.conn).items():
            for rewrite, label in pairs:
                steering._fire(converter, rewrite, (label,))
        for converter, pairs in attempts(db.conn).items():
            for (rewrite, klass), (n, reached, _) in pairs.items():
                steering.tried[converter, rewrite, klass] += n
                steering.reached[converter, rewrite, klass] += reached
        return steering

    def _fire(self, converter: str, rewrite: str, labels: Iterable[str]) -> None:
        for label in labels:
            if label.startswith(OP_PREFIX):
                self.ops.setdefault((converter, rewrite), set()).add(label.removeprefix(OP_PREFIX))
            elif (converter, rewrite, label) not in self.fired:
                self.fired.add((converter, rewrite, label))
                self._targets = None

    def record(self, result: TestResult) -> None:
        """One test's classes, and its attempt where its unit was steered to a pair of its converter."""
        for rewrite, labels in result.rewrite_classes.items():
            self._fire(result.converter, rewrite, labels)
        if result.steered:
            target = Target.of_detail(result.steered)
            if target.converter == result.converter:
                pair = (target.converter, target.rewrite, target.cls)
                self.tried[pair] += 1
                self.reached[pair] += int(result.reached_tool)
                if self.tried[pair] == LEARNED_AFTER:
                    self._targets = None

    def targets(self, converters: Sequence[str]) -> list[Demotion]:
        """(STEER, detail, 1.0) per target: the pairs never fired of the rewrites seen to fire, in the classes a
        lever chooses, less those learned unreachable."""
        if self._targets is None:
            found = []
            for converter, rewrite in sorted({(c, r) for c, r, _ in self.fired}):
                if converter not in converters:
                    continue
                ops = frozenset(self.ops.get((converter, rewrite), ()))
                for klass in LEVERS:
                    pair = (converter, rewrite, klass)
                    if pair in self.fired or unreachable_for_ops(klass, ops) or self._tried_out(pair):
                        continue
                    boosted = (*self._patterns(converter, rewrite), *self._cores(ops))
                    found.append(Target(converter, rewrite, klass, tuple(dict.fromkeys(boosted))))
            self._targets = [(STEER, t.detail(), 1.0) for t in found[:MAX_TARGETS]]
        return self._targets

    def _tried_out(self, pair: tuple[str, str, str]) -> bool:
        return self.tried[pair] >= LEARNED_AFTER and not self.reached[pair]

    def _cores(self, ops: frozenset[str]) -> tuple[str, ...]:
        """The generator's operators written with one of the ONNX operators `ops` (their onnx_core), at most
        MAX_CORE_OPS: a rewrite that matched Transpose nodes meets them more often where permutes are drawn more."""
        names = sorted(name for name in self.registry if self.registry[name].onnx_core in ops)
        return tuple(names[:MAX_CORE_OPS])

    def _patterns(self, converter: str, rewrite: str) -> tuple[str, ...]:
        names = []
        for name in self.registry:
            op = self.registry[name]
            if isinstance(op, Pattern) and any(self.tools.get(r.tool) == converter and r.fired_as == rewrite
                                               for r in op.rewrites):
                names.append(name)
        return tuple(sorted(names))
