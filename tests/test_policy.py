"""The one decision of what a worker tests (fuzzer/campaign/policy): each kind, with the graph and the campaign's
knowledge that trigger it. Demotions are given with chance 1.0, so nothing here depends on a random draw."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from fuzzer.campaign.policy.culprit_cut import AVOID_FOR, without_culprit
from fuzzer.campaign.policy.decide import Decision, DecisionKind, decide
from fuzzer.campaign.policy.novelty import SETTING, Demotion
from fuzzer.campaign.policy.settings import SKIPPED
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph

SCRIPT = "torch-onnx-script"


def two_branches(dtype: DType = DType.FLOAT32) -> Graph:
    """sin of one input beside relu of another: either can be cut out and leave the other."""
    b = GraphBuilder()
    x, y = b.input((3, 4), dtype), b.input((3, 4), dtype)
    return b.build((b.op("sin", (x,), (3, 4), dtype), b.op("relu", (y,), (3, 4), dtype)))


def sin_alone() -> Graph:
    b = GraphBuilder()
    x = b.input((3, 4), DType.FLOAT32)
    return b.build((b.op("sin", (x,), (3, 4), DType.FLOAT32),))


def decided(graph: Graph, converter: str = SCRIPT, demoted: Sequence[Demotion] = (), **config: object) -> Decision:
    worker = WorkerConfig(out_dir="unused", log_dir="unused", converters=(converter,), demote_known=True,
                          **config)  # type: ignore[arg-type]

    def cut_and_prepare(g: Graph, operators: Sequence[str], timings: dict[str, float]):
        rest: Graph | None = g
        for operator in operators:
            rest = without_culprit(rest, operator) if rest is not None else None
        return None if rest is None else (rest, prepare(rest, 1, timings, 1.0))

    return decide(worker, CONVERTERS[converter], 1, graph, prepare(graph, 1, {}, 1.0), demoted, cut_and_prepare)


def test_a_graph_nothing_is_known_about_is_tested_as_generated() -> None:
    decision = decided(two_branches())
    assert decision.kind is DecisionKind.TEST and not decision.kind.skips
    assert decision.graph is not None and decision.graph.ops() == ["sin", "relu"]
    assert decision.run_labels() == () and decision.options["opset"] >= 7


def test_the_operator_of_a_filed_bug_is_cut_out_and_the_rest_tested() -> None:
    decision = decided(two_branches(), demoted=[(AVOID_FOR + SCRIPT, "sin", 1.0)])
    assert decision.kind is DecisionKind.TEST_WITHOUT_CULPRITS
    assert decision.graph is not None and decision.graph.ops() == ["relu"]
    assert decision.run_labels() == ("culprit-avoided:sin",)


def test_a_graph_of_filed_bugs_only_is_skipped_as_nothing_left() -> None:
    decision = decided(sin_alone(), demoted=[(AVOID_FOR + SCRIPT, "sin", 1.0)])
    assert (decision.kind, decision.label) == (DecisionKind.SKIP_NOTHING_LEFT, "skipped-culprit-avoided")
    assert decision.reason.endswith("cut out: sin")


def test_a_trait_most_tests_of_which_end_in_a_filed_bug_skips_the_test() -> None:
    decision = decided(two_branches(DType.BFLOAT16), demoted=[(AVOID_FOR + SCRIPT, "trait:input:bfloat16", 1.0)])
    assert (decision.kind, decision.label) == (DecisionKind.SKIP_KNOWN_TRAIT, SKIPPED)
    assert "a bfloat16 input" in decision.reason


def test_a_dtype_the_converter_exports_at_no_opset_it_has_skips_the_test() -> None:
    decision = decided(two_branches(DType.BFLOAT16), demoted=[(SETTING, f"{SCRIPT}|bfloat16|99", 1.0)])
    assert (decision.kind, decision.label) == (DecisionKind.SKIP_SETTING_DEMOTED, SKIPPED)
    assert "below opset 99" in decision.reason


def test_a_pair_the_probe_found_unsupported_skips_the_test() -> None:
    decision = decided(two_branches(), skip_pairs={SCRIPT: [["sin", "float32"]]})
    assert (decision.kind, decision.label) == (DecisionKind.SKIP_KNOWN_UNSUPPORTED, "skipped-known-unsupported")
    assert decision.reason.endswith("unsupported: sin float32")


def test_an_operator_the_framework_cannot_express_skips_the_test() -> None:
    decision = decided(inexpressible_by_tensorflow(), converter="tf2onnx")
    assert (decision.kind, decision.label) == (DecisionKind.SKIP_INEXPRESSIBLE, "skipped-inexpressible")
    assert decision.reason == "its framework cannot express adaptive_avg_pool1d"


def inexpressible_by_tensorflow() -> Graph:
    b = GraphBuilder()
    x = b.input((1, 2, 8), DType.FLOAT32)
    return b.build((b.op("adaptive_avg_pool1d", (x,), (1, 2, 4), DType.FLOAT32, output_size=[4]),))


SCENARIOS: dict[DecisionKind, Callable[[], Decision]] = {
    DecisionKind.TEST: lambda: decided(two_branches()),
    DecisionKind.TEST_WITHOUT_CULPRITS: lambda: decided(two_branches(), demoted=[(AVOID_FOR + SCRIPT, "sin", 1.0)]),
    DecisionKind.SKIP_NOTHING_LEFT: lambda: decided(sin_alone(), demoted=[(AVOID_FOR + SCRIPT, "sin", 1.0)]),
    DecisionKind.SKIP_KNOWN_TRAIT: lambda: decided(two_branches(DType.BFLOAT16),
                                                   demoted=[(AVOID_FOR + SCRIPT, "trait:input:bfloat16", 1.0)]),
    DecisionKind.SKIP_SETTING_DEMOTED: lambda: decided(two_branches(DType.BFLOAT16),
                                                       demoted=[(SETTING, f"{SCRIPT}|bfloat16|99", 1.0)]),
    DecisionKind.SKIP_KNOWN_UNSUPPORTED: lambda: decided(two_branches(), skip_pairs={SCRIPT: [["sin", "float32"]]}),
    DecisionKind.SKIP_INEXPRESSIBLE: lambda: decided(inexpressible_by_tensorflow(), converter="tf2onnx"),
}


@pytest.mark.parametrize("kind", list(DecisionKind), ids=[k.name for k in DecisionKind])
def test_each_kind_is_decided_for_the_graph_that_triggers_it(kind: DecisionKind) -> None:
    assert SCENARIOS[kind]().kind is kind
