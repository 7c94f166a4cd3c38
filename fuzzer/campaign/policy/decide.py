"""decide(): the one decision of what a worker does with one converter's test of a unit."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzer.campaign.policy.culprit_cut import CULPRIT_AVOIDED, avoided_among, avoided_culprits
from fuzzer.campaign.policy.novelty import Demotion
from fuzzer.campaign.policy.settings import SKIPPED
from fuzzer.campaign.policy.tested_traits import traits_of_test
from fuzzer.campaign.policy.traits import describe_trait, is_trait
from fuzzer.campaign.policy.upstream_fallback import UPSTREAM_AFTER, chosen_options
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.result import Prepared, book_inner
from fuzzer.converters.base import Converter
from generators.ir import Graph

# Cuts `operators` out of a graph and prepares the rest (its steps timed into the dict); None when nothing is left.
CutAndPrepare = Callable[[Graph, Sequence[str], dict[str, float]], "tuple[Graph, Prepared] | None"]


class DecisionKind(enum.Enum):
    """What a worker does with one test; a skip's value is the label its result carries (Decision.label)."""

    TEST = "test"  # the graph as generated (or as far as the upstream exporters allowed)
    TEST_WITHOUT_CULPRITS = "test-without-culprits"  # the graph with the operators of filed bugs cut out
    SKIP_KNOWN_TRAIT = SKIPPED  # a trait of the graph or of the test that most such tests end in a filed bug for
    SKIP_SETTING_DEMOTED = "skipped-setting"  # every setting the test could take leads to a filed bug
    SKIP_NOTHING_LEFT = f"skipped-{CULPRIT_AVOIDED}"  # cutting the filed bugs' operators leaves nothing to test
    SKIP_KNOWN_UNSUPPORTED = "skipped-known-unsupported"  # the probe found its (operator, dtype) pairs unsupported
    SKIP_INEXPRESSIBLE = "skipped-inexpressible"  # the converter's framework cannot express an operator of it

    @property
    def skips(self) -> bool:
        return self not in (DecisionKind.TEST, DecisionKind.TEST_WITHOUT_CULPRITS)


@dataclass(frozen=True)
class Decision:
    """One decision: its kind, why (for a skip, as its result says), and what a test then runs on."""

    kind: DecisionKind
    reason: str = ""
    graph: Graph | None = None
    prepared: Prepared | None = None
    options: dict[str, Any] = field(default_factory=dict)
    avoided: tuple[str, ...] = ()  # the operators of filed bugs cut out
    left: tuple[str, ...] = ()  # the upstream exporters passed over (their bug on this graph is filed)
    traits: tuple[Any, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)  # of the cut and the upstream exports, made deciding

    @property
    def label(self) -> str:
        """The label a skipped test's result carries: a demoted setting's is SKIPPED too, as a trait's, since both
        skip for a known root cause and status counts them together."""
        return SKIPPED if self.kind is DecisionKind.SKIP_SETTING_DEMOTED else self.kind.value

    def run_labels(self) -> tuple[str, ...]:
        """The labels a test run on this decision adds to its verdict."""
        return tuple(label for label, names in ((CULPRIT_AVOIDED, self.avoided), (UPSTREAM_AFTER, self.left))
                     if names for label in [f"{label}:{','.join(names)}"])


def decide(config: WorkerConfig, converter: Converter, seed: int, graph: Graph, prepared: Prepared,
           demoted: Sequence[Demotion], cut_and_prepare: CutAndPrepare) -> Decision:
    """What to do with `converter`'s test of the unit of `seed`, from what the campaign demoted (`demoted`)."""
    name, start = converter.name, time.perf_counter()
    avoided = avoided_culprits(graph, name, seed, demoted) if config.demote_known else []
    covering = [token for token in avoided if is_trait(token)]
    if covering:  # a trait cannot be cut out: the filed bug it covers would end the test
        return Decision(DecisionKind.SKIP_KNOWN_TRAIT, f"a known root cause: most {name} tests of a graph with "
                        f"{' or '.join(map(describe_trait, covering))} end in a bug already filed")
    timings: dict[str, float] = {}
    if avoided:
        inner: dict[str, float] = {}
        rest = cut_and_prepare(graph, avoided, inner)
        timings[CULPRIT_AVOIDED] = time.perf_counter() - start
        book_inner(timings, CULPRIT_AVOIDED, inner)
        if rest is None:
            return Decision(DecisionKind.SKIP_NOTHING_LEFT, "nothing testable is left once the operators of its "
                            "filed bugs are cut out: " + ", ".join(avoided), timings=timings)
        graph, prepared = rest
    return _with_options(config, converter, seed, graph, prepared, demoted, tuple(avoided), timings)


def _with_options(config: WorkerConfig, converter: Converter, seed: int, graph: Graph, prepared: Prepared,
                  demoted: Sequence[Demotion], avoided: tuple[str, ...], timings: dict[str, float]) -> Decision:
    """The decision once the test's options are drawn: what the probe, the framework and the test's traits say."""
    name = converter.name
    opts, known_cause, left, exported = chosen_options(config, converter, seed, graph, prepared, demoted)
    timings = {**exported, **timings}
    known = config.known_unsupported(graph, name, opts)
    unwritable = config.inexpressible(graph, converter, opts)
    if known:
        return _skip(DecisionKind.SKIP_KNOWN_UNSUPPORTED, "the probe found these (operator, dtype) pairs unsupported: "
                     + ", ".join(f"{o} {d}" for o, d in known), opts, exported)
    if known_cause:
        return _skip(DecisionKind.SKIP_SETTING_DEMOTED, known_cause, opts, exported)
    if unwritable:
        return _skip(DecisionKind.SKIP_INEXPRESSIBLE, f"its framework cannot express {', '.join(unwritable)}", opts,
                     exported)
    traits = traits_of_test(graph, converter, opts, prepared)
    met = avoided_among(traits, name, seed, demoted) if config.demote_known else []
    if met:  # a trait cannot be cut out: the filed bug it covers would end the test
        return _skip(DecisionKind.SKIP_KNOWN_TRAIT, f"a known root cause: most {name} tests with "
                     f"{' or '.join(map(describe_trait, met))} end in a bug already filed", opts, exported)
    kind = DecisionKind.TEST_WITHOUT_CULPRITS if avoided else DecisionKind.TEST
    return Decision(kind, "", graph, prepared, opts, avoided, tuple(left), tuple(traits), timings)


def _skip(kind: DecisionKind, reason: str, options: dict[str, Any], timings: dict[str, float]) -> Decision:
    """A skip once the options are drawn: its result keeps them, and the time the upstream exports took."""
    return Decision(kind, reason, options=options, timings=timings)
