"""A root cause no operator names but a graph trait does (onnx2tf on any graph with a bfloat16 input): the spread
tally covers its hits with the trait, and its converter's tests of graphs holding it are skipped. The bug is planted
through the registry: an ONNX tool that fails on any model with a float64 input."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.policy.culprit_cut import avoided_culprits
from fuzzer.campaign.policy.model_traits import model_traits
from fuzzer.campaign.policy.novelty import AVOID_FOR, AVOID_PROBABILITY_CULPRIT, Novelty
from fuzzer.campaign.policy.settings import SKIPPED
from fuzzer.campaign.policy.spread import MIN_SAMPLES
from fuzzer.campaign.policy.tested_traits import traits_of_test, upstream_model
from fuzzer.campaign.policy.traits import (
    TRAIT,
    describe_trait,
    graph_traits,
    is_model_trait,
    is_trait,
    trait_token,
)
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.unit_graph import graph_message
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.pipeline import prepare
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.generator import GenOptions, generate
from generators.ir import Graph
from generators.onnx_native import native_nodes
from generators.registry import REGISTRY
from oracles.verdict import Symptom

BF16_INPUT = trait_token("input:bfloat16")


def test_a_graphs_traits_are_its_input_dtypes_its_scalar_inputs_and_outputs_and_every_dtype() -> None:
    b = GraphBuilder()
    x, s = b.input((2, 3), DType.BFLOAT16), b.input((), DType.BOOL)
    y = b.op("cast_float32", (x,), (2, 3), DType.FLOAT32)
    z = b.op("sum", (y,), (), DType.FLOAT32)
    graph = b.build((z, b.op("logical_not", (s,), (), DType.BOOL)))
    assert graph_traits(graph) == {"dtype:bfloat16", "dtype:bool", "dtype:float32", "input:bfloat16", "input:bool",
                                   "scalar-input", "scalar-input:bool", "scalar-output:float32", "scalar-output:bool"}
    assert (TRAIT, "input:bfloat16") in graph_message(0, graph).pairs
    assert is_trait(BF16_INPUT) and not is_trait("sin")
    assert describe_trait(BF16_INPUT) == "a bfloat16 input"
    assert describe_trait(trait_token("scalar-input:bool")) == "a scalar bool input"


def test_an_operator_written_as_an_onnx_conv_gives_the_onnx_core_trait_in_its_input_dtype() -> None:
    b = GraphBuilder()
    x = b.input((1, 2, 5, 5), DType.BFLOAT16)
    y = b.op("conv2d", (x,), (1, 3, 5, 5), DType.BFLOAT16, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1,
             kernel=(3, 3), out_channels=3, bias=True)
    traits = graph_traits(b.build((b.op("sin", (y,), (1, 3, 5, 5), DType.BFLOAT16),)))
    assert "onnx-core:Conv:bfloat16" in traits and not any(t.startswith("onnx-core:Sin") for t in traits)
    assert describe_trait(trait_token("onnx-core:Conv:bfloat16")) == \
        "an operator written as an ONNX Conv node, in bfloat16"


CORES = sorted(name for name, op in REGISTRY.items() if op.onnx_core)


@pytest.mark.parametrize("name", CORES)
def test_an_operators_onnx_core_is_written_by_its_native_counterpart(name: str) -> None:
    """OpSpec.onnx_core is what the operator's counterpart writes (the exporters write it too)."""
    for seed in range(20):
        graph = generate(seed, GenOptions(nodes=1, include_ops=(name,), dtypes=(DType.FLOAT32,), max_numel=256))
        nodes = native_nodes(graph, 17) if graph.nodes and graph.nodes[0].op == name else None
        if nodes is not None:
            assert REGISTRY[name].onnx_core in {node.op_type for node in nodes}
            return
    pytest.fail(f"no float32 graph of {name} with a native counterpart at opset 17 in 20 seeds")


def _test(novelty: Novelty, converter: str, ops: list[str], traits: list[str], signature: str = "") -> None:
    pairs = [(op, "float32") for op in ops] + [(TRAIT, t) for t in traits]
    novelty.seen(converter, pairs)
    if signature:
        novelty.record(signature, pairs, culprit=(converter, ""))


def _background(novelty: Novelty, tests: int, with_trait: int) -> None:
    """`tests` passing onnx2tf tests on filler graphs, `with_trait` of them with a bfloat16 input."""
    for k in range(tests):
        _test(novelty, "onnx2tf", [f"op{k % 30}", f"op{(k * 7) % 30}"],
              ["input:float32"] + (["input:bfloat16"] if k < with_trait else []))


def test_a_bug_of_every_graph_with_a_trait_is_covered_by_the_trait_for_its_converter_alone() -> None:
    novelty = Novelty()
    _background(novelty, tests=300, with_trait=4)  # a bfloat16 input is rare, and then nearly always the bug
    for k in range(MIN_SAMPLES + 1):  # each hit holds other operators: none common, none far more common
        _test(novelty, "onnx2tf", [f"op{k}", f"op{k + 10}"], ["input:bfloat16", "input:float32"], "sig-quint16")
    assert novelty.demoted() == []  # a trait is nothing the generator could leave out
    assert novelty.avoided() == [("onnx2tf", BF16_INPUT)]
    assert (AVOID_FOR + "onnx2tf", BF16_INPUT, AVOID_PROBABILITY_CULPRIT) in novelty.demotions()


def test_a_trait_most_of_whose_tests_pass_is_no_cover() -> None:
    """A bfloat16 input in 60 of 300 tests and in every hit of a bug hit 6 times: lift enough, precision not."""
    novelty = Novelty()
    _background(novelty, tests=300, with_trait=60)
    for k in range(MIN_SAMPLES + 1):
        _test(novelty, "onnx2tf", [f"op{k}", f"op{k + 10}"], ["input:bfloat16"], "sig-some-bfloat16")
    assert novelty.avoided() == []


def test_a_trait_cover_is_weighed_again_as_its_hits_grow() -> None:
    """At 6 hits among 20 tests with the trait the cover is refused; once the hits reach 16 it is taken."""
    novelty = Novelty()
    _background(novelty, tests=300, with_trait=14)
    for k in range(MIN_SAMPLES + 1):
        _test(novelty, "onnx2tf", [f"op{k}", f"op{k + 10}"], ["input:bfloat16"], "sig-quint16")
    assert novelty.avoided() == []
    for k in range(10):
        _test(novelty, "onnx2tf", [f"op{k + 3}"], ["input:bfloat16"], "sig-quint16")
    assert novelty.hits["sig-quint16"] == 16 and novelty.avoided() == [("onnx2tf", BF16_INPUT)]


def test_a_trait_whose_tests_end_mostly_in_filed_bugs_covers_the_one_it_holds_in_every_hit() -> None:
    """At 6 hits among 20 tests with the trait the cover is refused (as above); 20 more such tests that end in
    other bugs already filed make 25 of 40 that tell nothing new, and the cover is taken."""
    novelty = Novelty()
    _background(novelty, tests=300, with_trait=14)
    for k in range(MIN_SAMPLES + 1):
        pairs = [(f"op{k}", "float32"), (f"op{k + 10}", "float32"), (TRAIT, "input:bfloat16")]
        novelty.seen("onnx2tf", pairs, known=k > 0)  # the first hit filed the bug
        novelty.record("sig-quint16", pairs, culprit=("onnx2tf", ""))
    assert novelty.avoided() == []
    for k in range(20):
        novelty.seen("onnx2tf", [(f"op{k % 30}", "float32"), (TRAIT, "input:bfloat16")], known=True)
    novelty.seen("onnx2tf", [("op3", "float32"), (TRAIT, "input:bfloat16")], known=True)
    novelty.record("sig-quint16", [("op3", "float32"), (TRAIT, "input:bfloat16")], culprit=("onnx2tf", ""))
    assert novelty.spread.spent["onnx2tf"][BF16_INPUT] == 26 and novelty.spread.held["onnx2tf"][BF16_INPUT] == 41
    assert novelty.avoided() == [("onnx2tf", BF16_INPUT)]
    resumed = Novelty.from_tally(novelty.tally())
    assert resumed.spread.spent == novelty.spread.spent


class FailsOnFloat64Input(OnnxPassConverter):
    """An ONNX tool that fails on any model with a float64 input, whatever its operators."""

    name = "faulty-float64-input"
    libraries = ("onnxruntime",)
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(i.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE for i in model.graph.input):
            raise ValueError("unsupported input type")
        return model


def _run_avoiding(tmp_path: Path, trait: str) -> list[tuple[Graph, TestResult]]:
    """Ten units of sin/neg graphs in float32 and float64 under FailsOnFloat64Input, `trait` covering its bug: each
    graph with its test's result."""
    name = FailsOnFloat64Input.name
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=2, nodes=2,
                          include_ops=("sin", "neg"), dtypes=("float32", "float64"), check={"input_budget_s": 0.2},
                          demote_known=True, converters=(name,))
    post = Collected()
    runner = UnitRunner(config, ConverterRegistry([FailsOnFloat64Input()]), post)
    out = []
    for idx in range(10):
        runner.run_unit(idx, 300 + idx, (name,), [(AVOID_FOR + name, trait, 1.0)])
        post.flush()
        (result,) = [m for m in post.messages if isinstance(m, TestResult) and m.idx == idx]
        out.append((generate(300 + idx, config.gen_options(300 + idx)), result))
    return out


def test_a_converters_tests_of_graphs_with_an_avoided_trait_are_skipped(tmp_path: Path) -> None:
    name, trait = FailsOnFloat64Input.name, trait_token("input:float64")
    skipped = ran = 0
    for idx, (graph, result) in enumerate(_run_avoiding(tmp_path, trait)):
        if "input:float64" in graph_traits(graph):
            assert avoided_culprits(graph, name, 300 + idx, [(AVOID_FOR + name, trait, 1.0)]) == [trait]
            assert result.symptom == Symptom.UNSUPPORTED.json_name and result.labels == (SKIPPED,)
            assert result.message == (f"a known root cause: most {name} tests of a graph with a float64 input end in "
                                      "a bug already filed")
            skipped += 1
        else:
            assert not result.is_bug and SKIPPED not in result.labels
            ran += 1
    assert skipped and ran


def test_a_models_traits_are_its_input_dtypes_an_output_no_input_reaches_and_an_output_named_twice() -> None:
    """`c` comes from the shape of `x` alone (folded to a constant wherever shapes are static), `y` from its values;
    `y` is an output twice."""
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])  # an initializer an older IR lists as an input
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["c"]),
             helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), helper.make_node("Add", ["xf", "w"], ["y"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("c", "y", "y")]
    weight = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    model = helper.make_model(helper.make_graph(nodes, "g", [x, w], outputs, [weight]))
    ops = {"model-op:Shape", "model-op:ConstantOfShape", "model-op:Cast", "model-op:Add"}
    dtypes = {"model-dtype:bfloat16", "model-dtype:int64", "model-dtype:float32"}  # a ConstantOfShape is float32
    assert model_traits(model) == {"model-input:bfloat16", "constant-output", "repeated-output", *ops, *dtypes}
    plain = helper.make_model(helper.make_graph(nodes[2:], "g", [x], [outputs[1]], [weight]))
    assert model_traits(plain) == {"model-input:bfloat16", "model-op:Cast", "model-op:Add", "model-dtype:bfloat16",
                                   "model-dtype:float32"}
    if_ops = {"model-op:Shape", "model-op:Size", "model-op:Cast", "model-op:If", "model-dtype:bfloat16",
              "model-dtype:int64", "model-dtype:bool"}
    assert model_traits(_with_if(reads="s")) == {"model-input:bfloat16", "constant-output", "control-flow", *if_ops}
    assert model_traits(_with_if(reads="x")) == {"model-input:bfloat16", "control-flow", *if_ops}
    assert describe_trait(trait_token("model-dtype:bfloat16")) == "a bfloat16 tensor in the model it is given"
    scalar = helper.make_model(helper.make_graph([helper.make_node("Neg", ["s"], ["n"])], "g",
                                                 [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                                                 [helper.make_tensor_value_info("n", TensorProto.FLOAT, [])]))
    assert model_traits(scalar) == {"model-input:float32", "model-scalar-input", "model-op:Neg", "model-dtype:float32"}
    assert describe_trait(trait_token("tflite/model-scalar-input")) == ("a scalar input in the model it is given "
                                                                        "(as tflite)")
    assert is_model_trait(trait_token("keras/constant-output")) and is_model_trait(trait_token("model-input:int8"))
    assert not is_model_trait(trait_token("tflite/scalar-input")) and not is_model_trait("constant-output")
    assert describe_trait(trait_token("tflite/scalar-input")) == "a scalar input (as tflite)"
    assert describe_trait(trait_token("model-input:bfloat16")) == "a bfloat16 input in the model it is given"
    assert describe_trait(trait_token("keras/control-flow")) == ("an If, Loop or Scan node in the model it is given "
                                                                 "(as keras)")


def _scalar_arithmetic(shape: list[int], scalar_from: str, other: str = "e") -> onnx.ModelProto:
    """Relu of `x` (float32 of `shape`) into an Add with a scalar 1.0 made by `scalar_from` (a Constant node, or an
    initializer), read with `other` (the Relu's output, or the input itself)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    one = helper.make_tensor("c", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Relu", ["x"], ["e"]), helper.make_node("Add", ["c", other], ["y"])]
    constant = [helper.make_node("Constant", [], ["c"], value=one)] if scalar_from == "Constant" else []
    initializers = [one] if scalar_from == "initializer" else []
    return helper.make_model(helper.make_graph([*constant, *nodes], "g", [x],
                                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                               initializers))


def test_a_scalar_constant_in_arithmetic_on_a_computed_tensor_of_two_equal_dims_is_a_model_trait() -> None:
    """onnx2tf writes such an Add as its constant alone: a bug held by any graph operator that lowers so."""
    twin = "scalar-constant-twin-dims"
    assert twin in model_traits(_scalar_arithmetic([3, 3], "Constant"))
    assert twin in model_traits(_scalar_arithmetic([2, 5, 2], "Constant"))
    assert twin not in model_traits(_scalar_arithmetic([2, 3], "Constant"))  # no two dims alike
    assert twin not in model_traits(_scalar_arithmetic([1, 1, 4], "Constant"))  # ones are not counted
    assert twin not in model_traits(_scalar_arithmetic([3, 3], "initializer"))
    assert twin not in model_traits(_scalar_arithmetic([3, 3], "Constant", other="x"))  # the input, not computed
    assert describe_trait(trait_token(twin)) == ("a scalar constant in an Add, Sub, Mul or Div with a computed tensor "
                                                 "of two equal dimensions, in the model it is given")
    assert describe_trait(trait_token("keras/model-op:Expand")) == ("an ONNX Expand node in the model it is given "
                                                                    "(as keras)")


def _expand(shape_from: str) -> onnx.ModelProto:
    """Expand of `x` (float32 [1, 3]) to [2, 3], the shape made by `shape_from`: a Constant node, a Constant node
    through an Identity, an initializer, or the Shape of a second input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    like = helper.make_tensor_value_info("like", TensorProto.FLOAT, [2, 3])
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [2, 3])
    made = {"Constant": [helper.make_node("Constant", [], ["s"], value=shape)],
            "Constant+Identity": [helper.make_node("Constant", [], ["c"], value=shape),
                                  helper.make_node("Identity", ["c"], ["s"])],
            "initializer": [], "Shape": [helper.make_node("Shape", ["like"], ["s"])]}[shape_from]
    inputs = [x, like] if shape_from == "Shape" else [x]
    return helper.make_model(helper.make_graph([*made, helper.make_node("Expand", ["x", "s"], ["y"])], "g", inputs,
                                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                               [shape] if shape_from == "initializer" else []))


def test_an_expand_to_a_shape_of_constant_nodes_is_a_model_trait_and_one_to_another_shape_is_not() -> None:
    """onnx2tf writes such an Expand as the shape itself; the operator alone held three times the tests it failed."""
    trait = "constant-shape-expand"
    assert trait in model_traits(_expand("Constant")) and trait in model_traits(_expand("Constant+Identity"))
    assert trait not in model_traits(_expand("initializer")) and trait not in model_traits(_expand("Shape"))
    assert "model-op:Expand" in model_traits(_expand("initializer"))
    assert is_model_trait(trait_token(trait))
    assert describe_trait(trait_token(f"keras/{trait}")) == ("an Expand to a shape of Constant nodes in the model it "
                                                             "is given (as keras)")


def _with_if(reads: str) -> onnx.ModelProto:
    """An If on a condition from the shape of `x`, whose branch returns Identity of `reads` (read from outside)."""
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])
    branch = helper.make_graph([helper.make_node("Identity", [reads], ["r"])], "b", [],
                               [helper.make_tensor_value_info("r", TensorProto.UNDEFINED, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["n"]),
             helper.make_node("Cast", ["n"], ["c"], to=TensorProto.BOOL),
             helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", 0, None)]))


class FailsOnFloat64ModelInput(FailsOnFloat64Input):
    """The same fault, told apart by its setting: its tests count their traits under their upstream's opset."""

    name = "faulty-float64-model-input"

    def trait_setting(self, options: ConverterOptions) -> str:
        return f"opset{options.opset}"  # type: ignore[attr-defined]


def test_a_tests_traits_are_its_models_and_under_its_converters_setting_the_graphs_and_the_models() -> None:
    b = GraphBuilder()
    x = b.input((2, 3), DType.FLOAT64)
    graph = b.build((b.op("sin", (x,), (2, 3), DType.FLOAT64),))
    prepared = prepare(graph, 1, {}, 0.2)
    options = {"upstream": "onnx-native", "opset": 17}
    under_opset = {trait_token(t) for t in ("opset17/input:float64", "opset17/dtype:float64")}
    assert traits_of_test(graph, FailsOnFloat64ModelInput(), options, prepared) == under_opset  # not exported yet
    made, timings = upstream_model(options, prepared)
    assert made is not None and timings and all(name.startswith("upstream_") for name in timings)
    assert upstream_model(options, prepared) == (made, {})  # made once per source
    details = ("model-input:float64", "model-dtype:float64", "model-op:Sin")
    model = {trait_token(detail) for detail in details}
    assert traits_of_test(graph, FailsOnFloat64ModelInput(), options, prepared) == (
        under_opset | model | {trait_token(f"opset17/{detail}") for detail in details})
    assert traits_of_test(graph, FailsOnFloat64Input(), options, prepared) == model


def test_a_converters_tests_given_a_model_with_an_avoided_trait_are_skipped_after_the_upstream_export(
        tmp_path: Path) -> None:
    """The cover is a trait of the upstream model: the worker exports before the test, skips it where the model
    holds the trait, and sends the model's traits with the tests it runs."""
    name = FailsOnFloat64Input.name
    skipped = ran = 0
    for graph, result in _run_avoiding(tmp_path, trait_token("model-input:float64")):
        if "input:float64" in graph_traits(graph):
            assert result.symptom == Symptom.UNSUPPORTED.json_name and result.labels == (SKIPPED,)
            assert result.message == (f"a known root cause: most {name} tests with a float64 input in the model it "
                                      "is given end in a bug already filed")
            assert any(timer.startswith("upstream_") for timer in result.timings)
            skipped += 1
        else:
            assert not result.is_bug and SKIPPED not in result.labels
            ops = [t for t in result.traits if t.startswith("model-op:")]
            assert ops and set(result.traits) - set(ops) == {"model-input:float32", "model-dtype:float32"}
            ran += 1
    assert skipped and ran
