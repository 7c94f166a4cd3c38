"""Mutated exported models are flagged (wrong values or wrong shape/dtype, at node conversion); unmutated pass.

Each case exports a hand-written graph with the TorchScript exporter, applies one mutation to the ONNX proto
and judges it with judge_model, as if the exporter had produced the mutated model.
"""

from __future__ import annotations

from collections.abc import Callable

import hand_graphs
import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

from fuzzer.check.follow_up import NOT_RERUN, follow_up, node_source
from fuzzer.check.judge import judge, judge_model
from fuzzer.check.pipeline import CheckOptions, Expected, prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.runtime import run_onnx_target
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript, export_script
from generators.builder import GraphBuilder
from generators.ir import Graph
from oracles.verdict import Stage, Symptom, Verdict

Mutation = Callable[[onnx.ModelProto], None]


def _node(model: onnx.ModelProto, op_type: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type == op_type)


def _set_attr(node: onnx.NodeProto, name: str, value: object) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(name, value)])


def _constant_producing(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type == "Constant" and n.output[0] == name)


def bump_weight(model: onnx.ModelProto) -> None:
    init = next(i for i in model.graph.initializer if i.name == _node(model, "Conv").input[1])
    values = numpy_helper.to_array(init).copy()
    values.flat[0] += 0.5
    init.CopyFrom(numpy_helper.from_array(values, init.name))


def conv_pads(model: onnx.ModelProto) -> None:
    """Pads dropped, and the output shape left undeclared (as exporters with dynamic dims do)."""
    _set_attr(_node(model, "Conv"), "pads", [0, 0, 0, 0])
    del model.graph.value_info[:]
    for output in model.graph.output:
        for i, dim in enumerate(output.type.tensor_type.shape.dim):
            dim.dim_param = f"d{i}"


def conv_pads_declared(model: onnx.ModelProto) -> None:
    """Pads dropped but the old output shape still declared: strict shape inference must object."""
    _set_attr(_node(model, "Conv"), "pads", [0, 0, 0, 0])


def clip_bound(model: onnx.ModelProto) -> None:
    constant = _constant_producing(model, _node(model, "Clip").input[2])
    _set_attr(constant, "value", numpy_helper.from_array(np.array(0.25, dtype=np.float32)))


def cast_target(model: onnx.ModelProto) -> None:
    """Cast to float32 instead of float16, with the output declared to match (a consistent wrong model)."""
    cast = _node(model, "Cast")
    _set_attr(cast, "to", onnx.TensorProto.FLOAT)
    for output in model.graph.output:
        if output.name == cast.output[0]:
            output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT


def cast_target_declared(model: onnx.ModelProto) -> None:
    _set_attr(_node(model, "Cast"), "to", onnx.TensorProto.FLOAT)


def swap_sub(model: onnx.ModelProto) -> None:
    node = _node(model, "Sub")
    a, b = node.input
    node.input[:] = [b, a]


def drop_transpose(model: onnx.ModelProto) -> None:
    node = _node(model, "Transpose")
    for other in model.graph.output:
        if other.name == node.output[0]:
            # The graph output is the transpose's: make the Sub write it directly.
            _node(model, "Sub").output[0] = node.output[0]
    model.graph.node.remove(node)


def add_transpose(model: onnx.ModelProto) -> None:
    node = _node(model, "Relu")
    node.output[0], old = "relu_raw", node.output[0]
    transpose = helper.make_node("Transpose", ["relu_raw"], [old], perm=[0, 1, 3, 2])
    model.graph.node.insert(list(model.graph.node).index(node) + 1, transpose)


def norm_epsilon(model: onnx.ModelProto) -> None:
    """The normalization's epsilon raised from 1e-5 to 1.0: values shrink toward the bias."""
    _set_attr(_node(model, "LayerNormalization"), "epsilon", 1.0)


def pad_mode(model: onnx.ModelProto) -> None:
    _set_attr(_node(model, "Pad"), "mode", "edge")


CASES: dict[str, tuple[Callable[[], Graph], Mutation, Symptom]] = {
    "weight_value": (hand_graphs.conv_relu_add, bump_weight, Symptom.WRONG_VALUES),
    "conv_pads": (hand_graphs.conv_relu, conv_pads, Symptom.WRONG_SHAPE),
    "clip_bound": (hand_graphs.hardtanh_cast, clip_bound, Symptom.WRONG_VALUES),
    "cast_target": (hand_graphs.hardtanh_cast, cast_target, Symptom.WRONG_DTYPE),
    "swapped_sub": (hand_graphs.sub_permute, swap_sub, Symptom.WRONG_VALUES),
    "dropped_transpose": (hand_graphs.sub_permute, drop_transpose, Symptom.WRONG_VALUES),
    "added_transpose": (hand_graphs.conv_relu_add, add_transpose, Symptom.WRONG_VALUES),
    "pad_mode": (hand_graphs.pad_tanh, pad_mode, Symptom.WRONG_VALUES),
    "norm_epsilon": (hand_graphs.layer_norm_tanh, norm_epsilon, Symptom.WRONG_VALUES),
}
CAUGHT_BY_VALIDATION: dict[str, tuple[Callable[[], Graph], Mutation]] = {
    "conv_pads_declared": (hand_graphs.conv_relu_add, conv_pads_declared),
    "cast_target_declared": (hand_graphs.hardtanh_cast, cast_target_declared),
}
GRAPHS = {make.__name__: make for make, _, _ in CASES.values()}


def _exported(make: Callable[[], Graph]) -> tuple[Expected, onnx.ModelProto]:
    expected = prepare(make(), 0, {}, 1.0)
    assert isinstance(expected, Expected)
    return expected, export_script(expected.source, ScriptOptions(), Steps())


@pytest.mark.parametrize("graph_name", sorted(GRAPHS))
def test_unmutated_model_passes(graph_name: str) -> None:
    expected, model = _exported(GRAPHS[graph_name])
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert verdict.symptom is Symptom.PASS, verdict.message


@pytest.mark.parametrize("case", sorted(CASES))
def test_mutation_is_flagged_at_node_conversion(case: str) -> None:
    make, mutate, symptom = CASES[case]
    expected, model = _exported(make)
    mutate(model)
    result = judge_model(model, expected, CONVERTERS["torch-onnx-script"])
    verdict = result.verdict
    assert (verdict.symptom, verdict.stage) == (symptom, Stage.NODE_CONVERSION), verdict.message
    assert verdict.is_bug and verdict.signature.startswith(symptom.json_name)
    assert verdict.diverging_op in {n.op for n in expected.source.graph.nodes}


@pytest.mark.parametrize("case", sorted(CAUGHT_BY_VALIDATION))
def test_mutation_contradicting_declared_types_is_invalid(case: str) -> None:
    make, mutate = CAUGHT_BY_VALIDATION[case]
    expected, model = _exported(make)
    mutate(model)
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert (verdict.symptom, verdict.stage) == (Symptom.INVALID_MODEL, Stage.VALIDATION), verdict.message


def test_a_broken_model_is_invalid_at_validation() -> None:
    expected, model = _exported(hand_graphs.elementwise)
    _node(model, "Tanh").input[0] = "no_such_tensor"
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert (verdict.symptom, verdict.stage) == (Symptom.INVALID_MODEL, Stage.VALIDATION), verdict.message


class TanhBecomesSigmoid(TorchOnnxScript):
    """A deliberately faulty exporter: every Tanh is emitted as Sigmoid."""

    name = "test-tanh-becomes-sigmoid"

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        steps = Steps()
        model = export_script(source, options, steps)
        for node in model.graph.node:
            if node.op_type == "Tanh":
                node.op_type = "Sigmoid"
        return run_onnx_target(model, source, steps)


def test_follow_up_reruns_and_locates_the_first_diverging_operator() -> None:
    """elementwise() is mul -> tanh -> exp -> sub: the whole graph diverges at sub's output, prefixes at tanh."""
    converter = TanhBecomesSigmoid()
    expected, _ = _exported(hand_graphs.elementwise)
    options = converter.options()
    first = judge(expected, converter, options, {})
    assert first.verdict.diverging_op == "sub"
    result = follow_up(first, converter, options, CheckOptions())
    verdict = result.verdict
    assert verdict.symptom is Symptom.WRONG_VALUES, verdict.message
    assert (verdict.diverging_op, verdict.diverging_dtype) == ("tanh", "float32")
    assert "tanh" in verdict.signature and "first-diverging-prefix:2" in verdict.labels
    # The conversions the follow-ups ran again are booked under their own steps, not as oracle time.
    for step in ("rerun.export", "rerun.runtime", "locate.export", "locate.runtime", "locate.reference"):
        assert result.timings[step] > 0, step


def test_follow_up_does_not_rerun_a_divergence_whose_located_signature_is_filed() -> None:
    converter = TanhBecomesSigmoid()
    expected, _ = _exported(hand_graphs.elementwise)
    options = converter.options()
    first = judge(expected, converter, options, {})
    asked: list[str] = []

    def filed(signature: str) -> bool:
        asked.append(signature)
        return True

    result = follow_up(first, converter, options, CheckOptions(), filed)
    verdict = result.verdict
    assert asked == [verdict.signature] and "tanh" in verdict.signature  # asked of the located signature
    assert NOT_RERUN in verdict.labels and "first-diverging-prefix:2" in verdict.labels
    assert not any(step.startswith("rerun") for step in result.timings)
    unfiled = follow_up(first, converter, options, CheckOptions(), lambda signature: False)
    assert NOT_RERUN not in unfiled.verdict.labels and unfiled.timings["rerun.export"] > 0
    assert unfiled.verdict.signature == verdict.signature


# ---- order-unspecified outputs: topk(sorted=False) compared on what torch specifies ----------------------------

def _topk_unsorted() -> Graph:
    """topk(x, 4, sorted=False) of six distinct values: torch leaves the order of the four results unspecified."""
    from generators.dtypes import DType
    from generators.ir import Node, TensorType, validate
    from generators.registry import REGISTRY

    f32, i64 = TensorType((6,), DType.FLOAT32), TensorType((4,), DType.INT64)
    values = TensorType((4,), DType.FLOAT32)
    node = Node("topk", ("x",), ("v", "i"), {"k": 4, "dim": 0, "largest": True, "sorted": False})
    graph = Graph({"x": f32}, {}, (node,), ("v", "i"), {"x": f32, "v": values, "i": i64})
    validate(graph, REGISTRY)
    return graph


def _after_topk(model: onnx.ModelProto, make_node: Callable[[int, str, str], onnx.NodeProto]) -> None:
    """Route TopK's output k (0 values, 1 indices) through `make_node(k, its new name, its old name)`."""
    topk = _node(model, "TopK")
    for k, old in enumerate(list(topk.output)):
        fresh = f"{old}_before_mutation"
        topk.output[k] = fresh
        model.graph.node.append(make_node(k, fresh, old))


def _reversed(model: onnx.ModelProto) -> None:
    """The same four results in the opposite order: a converter may return them so."""
    consts = [numpy_helper.from_array(np.array([v], np.int64), n) for v, n in
              ((-1, "rev_start"), (-(2**62), "rev_end"), (0, "rev_axis"), (-1, "rev_step"))]
    model.graph.initializer.extend(consts)
    _after_topk(model, lambda k, src, dst: helper.make_node("Slice", [src, "rev_start", "rev_end", "rev_axis",
                                                                      "rev_step"], [dst]))


def _scaled_values(model: onnx.ModelProto) -> None:
    """The values scaled by 1.001 (the indices left alone): a real change of the results."""
    model.graph.initializer.append(numpy_helper.from_array(np.array(1.001, np.float32), "scale"))
    _after_topk(model, lambda k, src, dst: helper.make_node("Mul", [src, "scale"], [dst]) if k == 0
                else helper.make_node("Identity", [src], [dst]))


def test_an_unspecified_order_is_not_a_bug_but_changed_values_are() -> None:
    expected = prepare(_topk_unsorted(), 0, {}, 1.0)
    assert isinstance(expected, Expected)
    verdicts = {}
    for mutation in (None, _reversed, _scaled_values):
        model = export_script(expected.source, ScriptOptions(), Steps())
        if mutation is not None:
            mutation(model)
        verdicts[getattr(mutation, "__name__", "none")] = judge_model(model, expected,
                                                                      CONVERTERS["torch-onnx-script"]).verdict
    assert verdicts["none"].symptom is Symptom.PASS, verdicts["none"].message
    assert verdicts["_reversed"].symptom is Symptom.PASS, verdicts["_reversed"].message
    assert verdicts["_scaled_values"].symptom is Symptom.WRONG_VALUES, verdicts["_scaled_values"].message


def test_the_oracle_settles_outputs_from_the_values_the_source_runs_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """topk's input is kept from the eager and float64 runs, so judging a reordered result runs no graph again."""
    expected = prepare(_topk_unsorted(), 0, {}, 1.0)
    assert isinstance(expected, Expected) and expected.settling is not None and expected.settling64 is not None
    assert list(expected.settling) == ["x"] and expected.settling64["x"].dtype == np.float64
    assert np.array_equal(expected.settling["x"], expected.source.inputs[0].numpy())

    def no_second_run(*args: object) -> None:
        raise AssertionError("the oracle ran the graph again")

    monkeypatch.setattr("fuzzer.check.oracle.graph_values", no_second_run)
    model = export_script(expected.source, ScriptOptions(), Steps())
    _reversed(model)
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert verdict.symptom is Symptom.PASS, verdict.message


def test_outputs_bit_for_bit_the_sources_are_not_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settling is for outputs that differ from the source's: those equal to it (most) compare equal either way, so
    the oracle skips them; a reordered result is still settled, and passes."""
    expected = prepare(_topk_unsorted(), 0, {}, 1.0)
    assert isinstance(expected, Expected)
    topk = type(expected.source.module.ops[0])
    settled_outputs: list[int] = []
    original = topk.canonical_output

    def counted(self, attrs, position, value, inputs):  # noqa: ANN001, ANN202
        settled_outputs.append(position)
        return original(self, attrs, position, value, inputs)

    monkeypatch.setattr(topk, "canonical_output", counted)
    for mutation, settled_count in ((None, 0), (_reversed, 2 * 2)):  # reversed: both outputs, target and source
        model = export_script(expected.source, ScriptOptions(), Steps())
        if mutation is not None:
            mutation(model)
        settled_outputs.clear()
        verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
        assert verdict.symptom is Symptom.PASS, verdict.message
        assert len(settled_outputs) == settled_count


class RecordsGraphs(TanhBecomesSigmoid):
    """TanhBecomesSigmoid that records the operators of every graph it converts (a prefix, or one node alone)."""

    name = "test-records-graphs"

    def __init__(self) -> None:
        self.graphs: list[tuple[str, ...]] = []

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        self.graphs.append(tuple(node.op for node in source.graph.nodes))
        return super().convert_impl(source, options)


def _located(graph: Graph) -> tuple[Verdict, list[tuple[str, ...]]]:
    """The located verdict of `graph` under RecordsGraphs, and the graphs converted after the whole one."""
    expected = prepare(graph, 0, {}, 1.0)
    assert isinstance(expected, Expected)
    converter = RecordsGraphs()
    options = converter.options()
    first = judge(expected, converter, options, {})
    result = follow_up(first, converter, options, CheckOptions(rerun=False))
    assert converter.graphs[0] == tuple(node.op for node in graph.nodes)
    return result.verdict, converter.graphs[1:]


def test_locate_tries_no_prefix_longer_than_the_one_making_the_earliest_failing_output() -> None:
    """mul -> tanh -> exp (an output) and mul -> neg -> abs -> sub (an output): only exp's output diverges, and exp
    alone does not, so the bisection keeps to prefixes 2 and 1 (over the whole graph it tried 3, 2 and 1)."""
    g = GraphBuilder()
    a, b = g.input((3, 5)), g.input((3, 5))
    product = g.op("mul", (a, b), (3, 5))
    g.op("exp", (g.op("tanh", (product,), (3, 5)),), (3, 5))
    g.op("sub", (g.op("abs", (g.op("neg", (product,), (3, 5)),), (3, 5)), b), (3, 5))
    graph = g.build()
    assert len(graph.outputs) == 2 and len(graph.nodes) == 6
    verdict, tried = _located(graph)
    assert (verdict.diverging_op, verdict.diverging_dtype) == ("tanh", "float32")
    assert "first-diverging-prefix:2" in verdict.labels
    assert tried == [("exp",), ("mul", "tanh"), ("mul",)]  # exp alone, then the prefixes the bisection tried


def _chain(ops: tuple[str, ...]) -> Graph:
    g = GraphBuilder()
    x = g.input((3, 5))
    for op in ops:
        x = g.op(op, (x,), (3, 5))
    return g.build()


@pytest.mark.parametrize("ops, tried, label", [
    # tanh makes the one output and diverges alone: one export of one node settles it.
    (("exp", "neg", "abs", "tanh"), [("tanh",)], "diverges-alone:4"),
    # the second tanh makes the output and diverges alone, though the first one's hidden output diverges too.
    (("tanh", "neg", "tanh"), [("tanh",)], "diverges-alone:3"),
    # exp makes the output and passes alone: the prefixes short of it are bisected.
    (("neg", "tanh", "abs", "exp"), [("exp",), ("neg", "tanh"), ("neg",)], "first-diverging-prefix:2"),
    # tanh is third, its output hidden behind exp's: prefix 2 passes, prefix 3 diverges.
    (("exp", "neg", "tanh", "exp"), [("exp",), ("exp", "neg"), ("exp", "neg", "tanh")], "first-diverging-prefix:3"),
])
def test_locate_tries_the_operator_making_the_failing_output_alone_first(
        ops: tuple[str, ...], tried: list[tuple[str, ...]], label: str) -> None:
    verdict, converted = _located(_chain(ops))
    assert converted == tried
    assert verdict.diverging_op == "tanh" and label in verdict.labels
    assert len([x for x in verdict.labels if x.startswith(("diverges-alone", "first-diverging-prefix"))]) == 1


def test_a_node_alone_reads_the_values_it_reads_in_the_source() -> None:
    """conv2d reads an intermediate (relu's output) and a weight: alone, the intermediate is an input holding the
    eager values and the weight stays a weight; a node that reads only weights is not tried alone."""
    g = GraphBuilder()
    x = g.input((1, 2, 4, 4))
    w = g.weight((3, 2, 1, 1))
    g.op("conv2d", (g.op("relu", (x,), (1, 2, 4, 4)), w), (1, 3, 4, 4), stride=(1, 1), padding=(0, 0),
         dilation=(1, 1), groups=1, bias=False, padding_mode="zeros")
    g.op("neg", (g.weight((2, 2)),), (2, 2))
    graph = g.build()
    expected = prepare(graph, 0, {}, 1.0)
    assert isinstance(expected, Expected)
    source = expected.source
    relu_out, conv = graph.nodes[0].outputs[0], graph.nodes[1]
    alone = node_source(source, 1)
    assert alone is not None
    assert list(alone.graph.inputs) == [relu_out] and list(alone.graph.weights) == [w]
    assert alone.graph.nodes == (conv,) and alone.graph.outputs == conv.outputs
    assert torch.equal(alone.inputs[0], torch.relu(source.inputs[0]))
    assert torch.equal(getattr(alone.module, w), getattr(source.module, w))
    assert node_source(source, 2) is None
