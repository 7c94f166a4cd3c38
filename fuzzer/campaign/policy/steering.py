"""Generation steered to the ONNX tools' rewrites not yet seen to fire: a pattern operator (generators/ops/patterns.py)
declares the rewrites each tool makes of it; while a campaign has fired one of them in fewer than FIRED_ENOUGH tests
of that tool, graphs draw the pattern BOOST_WEIGHT times as often (generators/generator.py), as parts of larger
graphs like any operator, so the rewrite meets the dtypes, shapes and neighbours the rest of the graph brings. The
boosts travel with the demotions (novelty.py), so a unit stays a pure function of what it was sent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fuzzer.campaign import tallies
from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.policy.novelty import BOOST, Demotion
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import PatternRewrites
from generators.ops.patterns import Pattern
from generators.registry import REGISTRY, OpRegistry

FIRED_ENOUGH = 20  # tests of a tool that fired a rewrite before its pattern is drawn as often as any operator


def tool_converters(converters: Mapping[str, Converter] = CONVERTERS) -> dict[str, str]:
    """The converter whose tests record each pattern rewrite's tool (Rewrite.tool), as each declares it
    (capabilities.PatternRewrites)."""
    return {c.rewrite_tool: name for name, c in converters.items() if isinstance(c, PatternRewrites) and c.rewrite_tool}


@dataclass
class Steering:
    """The campaign's count of tests that fired each (converter, rewrite), and the boosts it implies."""

    fired: Counter[tuple[str, str]] = field(default_factory=Counter)
    registry: OpRegistry = REGISTRY
    tools: Mapping[str, str] = field(default_factory=tool_converters)
    _boosts: list[Demotion] | None = None

    @classmethod
    def from_db(cls, db: CampaignDB) -> Steering:
        """The counts of the sessions before (a resumed campaign)."""
        return cls(Counter({pair: n for pair, (n, _) in tallies.rewrite_counts(db.conn).items()}))

    def record(self, converter: str, rewrites: Iterable[str]) -> None:
        for name in rewrites:
            self.fired[converter, name] += 1
            if self.fired[converter, name] == FIRED_ENOUGH:
                self._boosts = None

    def boosts(self, converters: Sequence[str]) -> list[Demotion]:
        """(BOOST, pattern, 1.0) for each pattern with a rewrite of the campaign's tools fired too rarely yet."""
        if self._boosts is None:
            wanted = set()
            for name in self.registry:
                op = self.registry[name]
                if not isinstance(op, Pattern):
                    continue
                for rewrite in op.rewrites:
                    tool = self.tools.get(rewrite.tool)
                    if tool in converters and rewrite.fired_as and self.fired[tool, rewrite.fired_as] < FIRED_ENOUGH:
                        wanted.add(name)
            self._boosts = [(BOOST, name, 1.0) for name in sorted(wanted)]
        return self._boosts
