"""Which outputs the reducer keeps alone first: those a verdict shows diverging, or those fed by the operator its
crash names; none where every output qualifies."""

from __future__ import annotations

import numpy as np

from fuzzer.reduce.case import suspect_outputs
from generators.builder import GraphBuilder
from generators.ir import Graph
from oracles.compare import compare
from oracles.verdict import Stage, Symptom, Verdict


def _graph() -> Graph:
    """in0[2,3] -> exp -> tanh (output), exp -> sin -> cos (output), neg (output)."""
    g = GraphBuilder()
    x = g.input((2, 3))
    e = g.op("exp", (x,), (2, 3))
    g.op("tanh", (e,), (2, 3))
    g.op("cos", (g.op("sin", (e,), (2, 3)),), (2, 3))
    g.op("neg", (x,), (2, 3))
    return g.build()


def _out(graph: Graph, op: str) -> str:
    return next(n.outputs[0] for n in graph.nodes if n.op == op)


def _wrong_values(*bad: bool) -> Verdict:
    ones = np.ones((2, 3), np.float32)
    metrics = tuple(compare(ones * (2 if b else 1), ones, "float32") for b in bad)
    return Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, "onnx2tf", metrics, "wrong_values-x")


def test_diverging_outputs_are_the_suspects() -> None:
    graph = _graph()
    assert suspect_outputs(graph, _wrong_values(False, True, False)) == (_out(graph, "cos"),)


def test_every_output_diverging_names_no_suspect() -> None:
    assert suspect_outputs(_graph(), _wrong_values(True, True, True)) == ()


def test_a_crash_at_an_operator_suspects_the_outputs_it_feeds_smallest_first() -> None:
    graph = _graph()
    crash = Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, "onnx2tf", (), "crash-x", diverging_op="sin")
    assert suspect_outputs(graph, crash) == (_out(graph, "cos"),)
    shared = Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, "onnx2tf", (), "crash-x", diverging_op="exp")
    assert suspect_outputs(graph, shared) == (_out(graph, "tanh"), _out(graph, "cos"))


def test_a_crash_naming_no_operator_of_the_graph_has_no_suspect() -> None:
    crash = Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, "onnx2tf", (), "crash-x", message="boom")
    assert suspect_outputs(_graph(), crash) == ()
