"""The reducer against fake oracles (no converter): each shape of bug shrinks to one exact minimal graph."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fuzzer.reduce.passes import PASSES
from fuzzer.reduce.shrinker import ReduceResult, reduce_graph
from fuzzer.reduce.size import graph_size
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.edit import cut, prune
from generators.ir import Graph, Node, TensorType

F32 = DType.FLOAT32


class FakeOracle:
    """A stand-in for the converter check: the 'bug' is whatever `predicate` says; counts its calls."""

    def __init__(self, predicate: Callable[[Graph], bool]) -> None:
        self.predicate = predicate
        self.calls = 0

    def __call__(self, graph: Graph) -> bool:
        self.calls += 1
        return self.predicate(graph)


def chain() -> Graph:
    """in0[2,3,4] -> exp -> log10 -> tanh -> (+ in1) -> sin, with a side branch cos(in1) as a second output."""
    g = GraphBuilder()
    a, b = g.input((2, 3, 4)), g.input((2, 3, 4))
    t = g.op("exp", (a,), (2, 3, 4))
    t = g.op("log10", (t,), (2, 3, 4))
    t = g.op("tanh", (t,), (2, 3, 4))
    t = g.op("add", (t, b), (2, 3, 4))
    g.op("sin", (t,), (2, 3, 4))
    g.op("cos", (b,), (2, 3, 4))
    return g.build()


def _scalar_graph(*ops: str, ranges: dict | None = None, attrs: dict | None = None) -> Graph:
    """in r0 float32[] -> ops in a chain; the expected minimal graphs are written with this."""
    types = {"r0": TensorType((), F32)}
    nodes, prev = [], "r0"
    for i, op in enumerate(ops):
        out = f"t{i}"
        nodes.append(Node(op, (prev,), (out,), (attrs or {}).get(op, {})))
        types[out] = TensorType((), F32)
        prev = out
    return Graph({"r0": types["r0"]}, {}, tuple(nodes), (prev,), types, ranges or {})


def _names(graph: Graph) -> Graph:
    """Rename tensors canonically (inputs r0.., node outputs t0..) so tests compare structure, not names."""
    mapping = {n: f"r{i}" for i, n in enumerate(graph.inputs)}
    mapping.update({n: f"w{i}" for i, n in enumerate(graph.weights)})
    k = 0
    for node in graph.nodes:
        for o in node.outputs:
            mapping[o] = f"t{k}"
            k += 1
    ren = lambda names: tuple(mapping[n] for n in names)  # noqa: E731
    return Graph({mapping[n]: t for n, t in graph.inputs.items()}, {mapping[n]: t for n, t in graph.weights.items()},
                 tuple(Node(n.op, ren(n.inputs), ren(n.outputs), dict(n.attrs)) for n in graph.nodes),
                 ren(graph.outputs), {mapping[n]: t for n, t in graph.types.items()},
                 {mapping[n]: r for n, r in graph.ranges.items()})


def test_single_op_bug_shrinks_to_one_scalar_node() -> None:
    oracle = FakeOracle(lambda g: "log10" in g.ops())
    result = reduce_graph(chain(), 0, oracle, budget_s=60)
    assert _names(result.graph) == _scalar_graph("log10", ranges={"r0": (0, 0)})
    assert result.size_after < result.size_before and not result.exhausted
    assert oracle.calls == result.checks == sum(s.tries for s in result.stats)
    assert {"drop_outputs", "cut_nodes", "lower_ranks", "simplify_values"} <= set(result.helped)


def _follows(first: str, second: str) -> Callable[[Graph], bool]:
    def predicate(g: Graph) -> bool:
        producer = g.producer()
        return any(n.op == second and any(producer.get(i) and producer[i].op == first for i in n.inputs)
                   for n in g.nodes)

    return predicate


def test_op_pair_bug_keeps_exactly_the_pair() -> None:
    result = reduce_graph(chain(), 0, FakeOracle(_follows("log10", "tanh")), budget_s=60)
    assert _names(result.graph) == _scalar_graph("log10", "tanh", ranges={"r0": (0, 0)})


def test_shape_bug_keeps_the_smallest_failing_dim() -> None:
    """The bug needs a dim of at least 3 on the log10 output: everything else shrinks to rank 1, size 3."""
    def predicate(g: Graph) -> bool:
        return any(n.op == "log10" and max(g.types[n.outputs[0]].shape, default=0) >= 3 for n in g.nodes)

    result = reduce_graph(chain(), 0, FakeOracle(predicate), budget_s=60)
    vec = TensorType((3,), F32)
    assert _names(result.graph) == Graph({"r0": vec}, {}, (Node("log10", ("r0",), ("t0",)),), ("t0",),
                                         {"r0": vec, "t0": vec}, {"r0": (0, 0)})


def test_attribute_bug_moves_toward_defaults_but_keeps_what_matters() -> None:
    """A leaky_relu bug that needs a non-zero slope: slope 0.2 becomes 1.0 (0.0 loses the bug)."""
    g = GraphBuilder()
    x = g.input((4, 5))
    g.op("leaky_relu", (g.op("neg", (x,), (4, 5)),), (4, 5), negative_slope=0.2)
    oracle = FakeOracle(lambda gr: any(n.op == "leaky_relu" and n.attrs["negative_slope"] != 0 for n in gr.nodes))
    result = reduce_graph(g.build(), 0, oracle, budget_s=60)
    expected = _scalar_graph("leaky_relu", ranges={"r0": (0, 0)}, attrs={"leaky_relu": {"negative_slope": 1.0}})
    assert _names(result.graph) == expected


def test_value_bug_keeps_a_range_that_shows_it() -> None:
    """The bug needs non-zero inputs: values simplify to ones, not zeros."""
    result = reduce_graph(chain(), 0, FakeOracle(lambda g: "sin" in g.ops() and
                                                 all(g.ranges.get(n, (-2, 2)) != (0, 0) for n in g.inputs)), 60)
    assert _names(result.graph) == _scalar_graph("sin", ranges={"r0": (1, 1)})


def test_no_smaller_candidate_keeps_the_graph_and_counts_tries() -> None:
    graph = chain()
    oracle = FakeOracle(lambda g: g == graph)
    result = reduce_graph(graph, 0, oracle, budget_s=60)
    assert result.graph == graph and result.helped == []
    assert [s.name for s in result.stats] == [p.__name__ for p in PASSES]
    assert result.checks == oracle.calls > 0 and result.rounds == 1


def test_budget_zero_returns_the_original_marked_exhausted() -> None:
    graph = chain()
    result = reduce_graph(graph, 0, FakeOracle(lambda g: True), budget_s=0)
    assert result.graph == graph and result.exhausted and result.checks == 0


def test_cut_feeds_readers_from_a_fresh_input_of_the_same_type() -> None:
    graph = chain()
    cut_graph = cut(graph, 1)  # log10: tanh now reads a fresh input r0 of log10's output type
    assert cut_graph is not None
    assert cut_graph.ops() == ["tanh", "add", "sin", "cos"]
    assert cut_graph.inputs == {"in1": TensorType((2, 3, 4), F32), "r0": TensorType((2, 3, 4), F32)}
    assert prune(cut_graph) == cut_graph and graph_size(cut_graph) < graph_size(graph)


# ---- the case-level wrapper and the CLI, on an already minimal case of a converter planted through the registry --

@pytest.mark.slow
def test_reduce_command_writes_a_linked_reduced_case(tmp_path, capsys) -> None:
    import dataclasses

    from test_campaign_reduce import CrashesOnElu

    from fuzzer.cases.case import case_from_result, collect_versions
    from fuzzer.cases.folder import read_case, write_case
    from fuzzer.check.pipeline import check_prepared
    from fuzzer.check.source import prepare
    from fuzzer.commands import main as cli
    from generators.generator import GenOptions, generate

    # A crash (the planted exporter has no elu), not a wrong value: `reduce` re-derives inputs from the seed, and
    # the input search may change between versions, while this crash does not depend on input values.
    graph = generate(0, GenOptions(nodes=1, include_ops=("elu",), dtypes=(DType.FLOAT32,)))
    result = check_prepared(prepare(graph, 0, {}, 1.0), CrashesOnElu())
    found = case_from_result(result, graph, 0, CrashesOnElu.name, collect_versions(()))
    folder = write_case(tmp_path / "found", dataclasses.replace(found, id=f"{found.id}-reduced"))
    out = tmp_path / "out"
    assert cli.main(["reduce", str(folder), "--out", str(out), "--time", "30s", "--registry",
                     "test_campaign_reduce:PLANTED_REGISTRY"]) == 0
    assert "1 -> 1 nodes" in capsys.readouterr().out
    reduced = read_case(out / folder.name)  # '<id>-reduced' stays '<id>-reduced'
    original = read_case(folder)
    assert reduced.signature == original.signature and reduced.original == folder.name
    assert reduced.graph.ops() == ["elu"] and reduced.reduction["nodes_after"] == 1
    assert [p["name"] for p in reduced.reduction["passes"]] == [p.__name__ for p in PASSES]


def test_promote_sets_the_expectation(tmp_path, capsys) -> None:
    """A case of a planted exporter's bug (every Sin written as Cos) is promoted as a known bug after its replay,
    and refused as must-pass while it still fails."""
    from test_corpus import _sin_case

    from fuzzer.cases.folder import read_case, write_case
    from fuzzer.commands import main as cli

    folder = write_case(tmp_path / "found", _sin_case())
    registry = ["--registry", "test_reduce_isolated:PLANTED_EXPORTER"]
    assert cli.main(["promote", str(folder), "--corpus", str(tmp_path / "corpus"), *registry]) == 0
    assert read_case(tmp_path / "corpus" / folder.name).expectation == "bug"
    assert cli.main(["promote", str(folder), "--corpus", str(tmp_path / "corpus"), "--expect", "pass",
                     *registry]) == 2
    assert "still fails" in capsys.readouterr().err


def test_a_candidate_may_not_trade_the_bug_for_invalid_inputs_or_a_new_tie() -> None:
    from fuzzer.reduce.case import same_bug
    from oracles.verdict import Stage, Symptom, Verdict

    original = Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, "x", signature="s", labels=("comparison_tie",))
    alike = Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, "x", signature="s",
                    labels=("comparison_tie", "first-diverging-prefix:1"))
    assert same_bug(original, alike)
    for gained in ("invalid-inputs", "rounding_tie"):
        worse = Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, "x", signature="s", labels=(gained,))
        assert not same_bug(original, worse), gained
    other = Verdict(Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, "x", signature="t")
    assert not same_bug(original, other)


def _fan() -> Graph:
    """in0[2,3] -> exp, tanh, sin, cos, neg: five outputs, one node each."""
    g = GraphBuilder()
    x = g.input((2, 3))
    for op in ("exp", "tanh", "sin", "cos", "neg"):
        g.op(op, (x,), (2, 3))
    return g.build()


def _output_of(graph: Graph, op: str) -> str:
    return next(n.outputs[0] for n in graph.nodes if n.op == op)


def _drop_outputs_stats(result: ReduceResult) -> tuple[int, int]:
    stats = next(s for s in result.stats if s.name == "drop_outputs")
    return stats.tries, stats.accepts


def test_a_suspect_output_kept_alone_takes_one_check_where_halving_and_dropping_take_four() -> None:
    graph = _fan()
    blind = reduce_graph(graph, 0, FakeOracle(lambda g: "tanh" in g.ops()), budget_s=60)
    aimed = reduce_graph(graph, 0, FakeOracle(lambda g: "tanh" in g.ops()), budget_s=60,
                         suspects=(_output_of(graph, "tanh"),))
    # keep (sin, cos, neg): no; keep (exp, tanh): yes; then drop tanh: no, drop exp: yes
    assert _drop_outputs_stats(blind) == (4, 2)
    assert _drop_outputs_stats(aimed) == (1, 1)
    assert _names(aimed.graph) == _names(blind.graph) == _scalar_graph("tanh", ranges={"r0": (0, 0)})


def test_a_wrong_suspect_costs_one_check_and_the_outputs_are_then_dropped_in_turn() -> None:
    graph = _fan()
    result = reduce_graph(graph, 0, FakeOracle(lambda g: "tanh" in g.ops()), budget_s=60,
                          suspects=(_output_of(graph, "sin"),))
    assert _drop_outputs_stats(result) == (5, 2)
    assert _names(result.graph) == _scalar_graph("tanh", ranges={"r0": (0, 0)})
