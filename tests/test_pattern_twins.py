"""A pattern operator is often followed by its twin on the same inputs, so that ONNX Runtime's common subexpression
elimination leaves a fusion an intermediate another pattern still reads (the edge case of issue 29: a pattern whose
inner value has a second consumer)."""

from __future__ import annotations

from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from generators.dtypes import DType
from generators.generator import PATTERN_TWIN_PROB, GenOptions, generate
from generators.ir import Graph


def twins(graph: Graph) -> int:
    """Pattern nodes right after a node of the same pattern on the same data inputs."""
    nodes = graph.nodes
    return sum(1 for a, b in zip(nodes, nodes[1:], strict=False)
               if b.op.startswith("pattern_") and a.op == b.op and a.inputs[:1] == b.inputs[:1])


def test_a_pattern_is_followed_by_its_twin_about_as_often_as_drawn() -> None:
    options = GenOptions(nodes=6, include_ops=("pattern_gelu", "relu", "neg"), dtypes=(DType.FLOAT32,))
    graphs = [generate(seed, options) for seed in range(120)]
    patterns = sum(node.op == "pattern_gelu" for graph in graphs for node in graph.nodes)
    found = sum(twins(graph) for graph in graphs)
    first = patterns - found  # each twin follows one drawn pattern
    assert abs(found / first - PATTERN_TWIN_PROB) < 0.1
    assert [twins(generate(seed, options)) for seed in range(20)] == [twins(g) for g in graphs[:20]]


def test_twins_share_their_prefix_in_onnx_runtime_and_the_fusion_keeps_off_it() -> None:
    """Two erf GELUs of one input: ONNX Runtime merges their common Div and Erf, and GeluFusion, which may not
    delete a value another node reads, leaves both alone; the outputs still match the unoptimized run."""
    options = GenOptions(nodes=2, include_ops=("pattern_gelu",), dtypes=(DType.FLOAT32,))
    seed = next(s for s in range(50) if twins(generate(s, options)) == 1)
    graph = generate(seed, options)
    result = check_prepared(prepare(graph, seed, {}, 1.0), CONVERTERS["ort-optimizer"],
                            {"level": "all", "upstream": "onnx-native"})
    assert result.verdict.symptom.json_name == "pass" and result.target is not None
    assert "CommonSubexpressionElimination" in result.target.rewrites
    assert "GeluFusionL2" not in result.target.rewrites
