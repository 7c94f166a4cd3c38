"""Reduction keeps the failure it was given: a candidate that fails otherwise (another exception type, another
symptom), a graph of no operator, or missing outputs computed by other operators is not the same bug.

The judges here are fake oracles (named so): each returns the verdict a converter would for a graph, and the
reducer's own acceptance (keeps_defect) decides, as it does with the real converter in its checker."""

from __future__ import annotations

from collections.abc import Callable

from test_reduce import chain

from fuzzer.reduce.case import keeps_defect
from fuzzer.reduce.shrinker import PassStats, Shrinker, reduce_graph
from generators.ir import Graph
from oracles.signature import crash_signature, wrong_value_signature
from oracles.verdict import Stage, Symptom, Verdict

CONVERTER = "fake-converter"


def fake_type_error_oracle(graph: Graph) -> Verdict:
    """A fake oracle: a graph of three operators or more holding `sin` crashes with a TypeError raised at `sin`; a
    smaller one gets a ValidationError naming its first operator (upstream of `sin` in the original graph)."""
    if "sin" in graph.ops() and len(graph.nodes) >= 3:
        exc, message, stage, symptom = "builtins.TypeError", "unsupported operand (op_type: sin)", \
            Stage.NODE_CONVERSION, Symptom.CRASH
    else:
        exc, message, stage, symptom = "onnx.checker.ValidationError", \
            f"Field 'shape' of 'type' is required (op_type: {graph.nodes[0].op})", Stage.VALIDATION, \
            Symptom.INVALID_MODEL
    return Verdict(symptom, stage, CONVERTER, signature=crash_signature(CONVERTER, stage, exc, message),
                   message=f"{exc}: {message}")


def fake_missing_outputs_oracle(graph: Graph) -> Verdict:
    """A fake oracle: the converter always loses its model's outputs, whatever computes them."""
    signature = wrong_value_signature(CONVERTER, Stage.NODE_CONVERSION, Symptom.WRONG_SHAPE, None, None)
    return Verdict(Symptom.WRONG_SHAPE, Stage.NODE_CONVERSION, CONVERTER, signature=signature,
                   message=f"target has 0 outputs, the graph {len(graph.outputs)}")


def judged_by(oracle: Callable[[Graph], Verdict], original: Graph) -> Callable[[Graph], bool]:
    """is_same_bug as the reducer builds it, with `oracle` in place of the converter's check."""
    first = oracle(original)
    return lambda candidate: keeps_defect(first, original, oracle(candidate), candidate)


def test_a_crash_is_not_reduced_into_another_exception_type() -> None:
    result = reduce_graph(chain(), 0, judged_by(fake_type_error_oracle, chain()), budget_s=60)
    assert result.graph.ops() == ["tanh", "add", "sin"]
    assert fake_type_error_oracle(result.graph).message.startswith("builtins.TypeError: ")


def test_missing_outputs_are_not_reduced_into_a_graph_of_no_operator_or_other_operators() -> None:
    """chain()'s outputs are computed by `sin` and `cos`: the smallest graph that keeps the bug is one of them."""
    result = reduce_graph(chain(), 0, judged_by(fake_missing_outputs_oracle, chain()), budget_s=60)
    assert result.graph.ops() == ["sin"]
    assert len(result.graph.inputs) == 1 and result.graph.outputs == result.graph.nodes[0].outputs


def test_a_graph_of_no_operator_is_never_considered() -> None:
    graph = chain()
    empty = Graph({"in0": graph.inputs["in0"]}, {}, (), ("in0",), {"in0": graph.types["in0"]}, {})
    calls: list[Graph] = []
    shrinker = Shrinker(graph, 0, lambda g: calls.append(g) is None, deadline=float("inf"),
                        stats={"drop": PassStats("drop")}, active="drop")
    assert (shrinker.consider(empty), calls, shrinker.current) == (False, [], graph)
