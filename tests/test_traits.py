"""A root cause no operator names but a graph trait does (onnx2tf on any graph with a bfloat16 input): the spread
tally covers its hits with the trait, and its converter's tests of graphs holding it are skipped. The bug is planted
through the registry: an ONNX tool that fails on any model with a float64 input."""

from __future__ import annotations

from pathlib import Path

import onnx

from fuzzer.campaign.culprit_cut import avoided_culprits
from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.novelty import AVOID_FOR, AVOID_PROBABILITY_CULPRIT, Novelty
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.settings import SKIPPED
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.spread import MIN_SAMPLES
from fuzzer.campaign.traits import TRAIT, describe_trait, graph_traits, is_trait, trait_token
from fuzzer.campaign.unit_graph import graph_message
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.generator import generate
from oracles.verdict import Symptom

BF16_INPUT = trait_token("input:bfloat16")


def test_a_graphs_traits_are_its_input_dtypes_its_scalar_inputs_and_outputs_and_every_dtype() -> None:
    b = GraphBuilder()
    x, s = b.input((2, 3), DType.BFLOAT16), b.input((), DType.BOOL)
    y = b.op("cast_float32", (x,), (2, 3), DType.FLOAT32)
    z = b.op("sum", (y,), (), DType.FLOAT32)
    graph = b.build((z, b.op("logical_not", (s,), (), DType.BOOL)))
    assert graph_traits(graph) == {"dtype:bfloat16", "dtype:bool", "dtype:float32", "input:bfloat16", "input:bool",
                                   "scalar-input:bool", "scalar-output:float32", "scalar-output:bool"}
    assert (TRAIT, "input:bfloat16") in graph_message(0, graph).pairs
    assert is_trait(BF16_INPUT) and not is_trait("sin")
    assert describe_trait(BF16_INPUT) == "a bfloat16 input"
    assert describe_trait(trait_token("scalar-input:bool")) == "a scalar bool input"


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


def test_a_converters_tests_of_graphs_with_an_avoided_trait_are_skipped(tmp_path: Path) -> None:
    name = FailsOnFloat64Input.name
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=2, nodes=2,
                          include_ops=("sin", "neg"), dtypes=("float32", "float64"), check={"input_budget_s": 0.2},
                          demote_known=True, converters=(name,))
    post = Collected()
    runner = UnitRunner(config, ConverterRegistry([FailsOnFloat64Input()]), post)
    trait = trait_token("input:float64")
    demoted = [(AVOID_FOR + name, trait, 1.0)]
    skipped = ran = 0
    for idx in range(10):
        runner.run_unit(idx, 300 + idx, (name,), demoted)
        post.flush()
        graph = generate(300 + idx, config.gen_options(300 + idx))
        (result,) = [m for m in post.messages if isinstance(m, TestResult) and m.idx == idx]
        if "input:float64" in graph_traits(graph):
            assert avoided_culprits(graph, name, 300 + idx, demoted) == [trait]
            assert result.symptom == Symptom.UNSUPPORTED.json_name and result.labels == (SKIPPED,)
            assert result.message == (f"a known root cause: most {name} tests of a graph with a float64 input end in "
                                      "a bug already filed")
            skipped += 1
        else:
            assert not result.is_bug and SKIPPED not in result.labels
            ran += 1
    assert skipped and ran
