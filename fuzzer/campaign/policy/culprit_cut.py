"""Testing what stands behind a known bug: the operator a filed root cause is filed under, cut out of the graph.

A graph whose test ends in a root cause already filed tells nothing about its other operators, and demotion makes
such graphs rarer without testing the rest of them. The worker cuts every node of the culprit operator (the one the
root cause names: the first diverging operator, or the one the error names; where the error names none, the one the
filed case was reduced to) out of the graph (generators/edit.py: the readers read fresh inputs, the upstream part
stays observable) and tests what is left with the same converter and options; the test then ends in whatever that
shows, and the filed root cause still counts its hit.

A filed bug whose verdict names no operator of the graph (the operator at fault is an ONNX one that several graph
operators emit, spread.py) is cut out by guess: every operator cut out for its converter's demoted bugs
(CULPRIT_GUESSED), and the filed bug's hit counts as one that named no culprit.

Once such a bug is demoted, its converter does not wait to hit it: a graph holding the culprit has it cut out before
that converter runs (avoided_culprits; the other converters test the graph whole), in most graphs, not all, so that
a fix still shows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from fuzzer.campaign.policy.novelty import AVOID_FOR, Demotion
from fuzzer.campaign.policy.traits import graph_trait_tokens
from fuzzer.cases.case_head import read_case_head
from fuzzer.cases.case_json import CaseError, reduced_folder
from fuzzer.support.chance import seeded_chance
from generators.edit import cut
from generators.ir import Graph
from oracles.rootcause import ANY_OPERATOR, UNLOCALIZED, localized_operator, named_operator
from oracles.verdict import Verdict

CULPRIT_CUT = "culprit-cut"  # label of a test's verdict reached with the culprit of a filed bug cut out: culprit-cut:OP
# The same, where the filed bug's verdict named no operator of the graph: culprit-cut-guessed:OP,OP (known_culprits).
CULPRIT_GUESSED = CULPRIT_CUT + "-guessed"
CULPRIT_AVOIDED = "culprit-avoided"  # label of a test run with known culprits cut out first: culprit-avoided:OP,OP
# The timer of the cut-and-retest of past_known; its steps inside are booked as "culprit_cut.<step>".
CUT_TIMER = "culprit_cut"
CUT_ROUNDS = 2  # a graph whose rest ends in a second filed bug is cut once more, no further


def culprit_operator(graph: Graph, verdict: Verdict) -> str | None:
    """The graph operator `verdict`'s root cause is filed under (for a dtype below the opset, the operator the error
    names); None when that is no operator of the graph."""
    ops = [node.op for node in graph.nodes]
    operator = localized_operator(verdict.symptom.json_name, verdict.message, verdict.diverging_op, ops)
    if operator not in ops:  # the owner's word for it (an ONNX operator, or any operator): the graph's where it maps
        operator = named_operator(verdict.message, ops) or ""
    return operator if operator in ops else None


def reduced_culprit(case_dir: Path) -> str | None:
    """The operator the reduced case in a filed case folder is filed under; None before the reducer wrote one, or
    where even the reduced case names none (its graph keeps operators that the error does not tell apart)."""
    reduced = reduced_folder(case_dir)
    if reduced is None:
        return None
    try:
        cause = read_case_head(reduced).root_cause
    except CaseError:  # being written, or damaged: as if not reduced yet
        return None
    operator = cause.shown_operator
    return operator if operator not in (UNLOCALIZED, ANY_OPERATOR) else None


def without_culprit(graph: Graph, operator: str) -> Graph | None:
    """`graph` with every node of `operator` cut out; None when nothing observable is left."""
    while True:
        found = [i for i, node in enumerate(graph.nodes) if node.op == operator]
        if not found:
            break
        smaller = cut(graph, found[-1])
        if smaller is None:
            return None
        graph = smaller
    return graph if graph.nodes else None


def known_culprits(graph: Graph, converter: str, demoted: Sequence[Demotion]) -> list[str]:
    """The operators of `graph` cut out for `converter`'s demoted bugs (AVOID_FOR), whether drawn or not: what a test
    that hit a filed bug naming none of its operators is run again without."""
    kind, ops = AVOID_FOR + converter, graph.ops()
    return sorted({op for k, op, _ in demoted if k == kind and op in ops})


def avoided_culprits(graph: Graph, converter: str, seed: int, demoted: Sequence[Demotion]) -> list[str]:
    """The operators (and trait tokens, traits.py) of `graph` that `converter`'s filed bugs are filed under
    (AVOID_FOR demotions), each drawn from the seed with its probability: the ones to cut out (or, for a trait, the
    test to skip for) before the converter runs."""
    kind = AVOID_FOR + converter
    if not any(k == kind for k, _, _ in demoted):
        return []
    return avoided_among(set(graph.ops()) | graph_trait_tokens(graph), converter, seed, demoted)


def avoided_among(tokens: Collection[str], converter: str, seed: int, demoted: Sequence[Demotion]) -> list[str]:
    """Those of `tokens` (operators or trait tokens) that `converter`'s filed bugs are filed under, each drawn from
    the seed with its demotion's probability."""
    kind = AVOID_FOR + converter
    return sorted(op for k, op, chance in demoted
                  if k == kind and op in tokens and seeded_chance(f"avoid:{seed}:{converter}:{op}") < chance)
