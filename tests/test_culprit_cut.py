"""A test that ends in a bug already filed is run again without that bug's culprit operator, so the rest of its graph
is tested; the filed bug still counts the hit. The bugs are planted through the registry: an ONNX tool that fails on
any model holding a Sin node, and on one holding a Neg node with another message."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from fuzzer.campaign.culprit_cut import CULPRIT_CUT, culprit_operator, without_culprit
from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.generator import generate
from oracles.verdict import Stage, Symptom, Verdict


class FailsOnSinThenNeg(OnnxPassConverter):
    """An ONNX tool with two bugs: it refuses a Sin node, and (a second bug) a Neg node."""

    name = "faulty-sin-neg"
    libraries = ("onnxruntime",)
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        ops = {node.op_type for node in model.graph.node}
        if "Sin" in ops:
            raise ValueError("cannot fold op_type: Sin")
        if "Neg" in ops:
            raise KeyError("no rule for op_type: Neg")
        return model


REGISTRY = ConverterRegistry([FailsOnSinThenNeg()])


def sin_neg_graph():  # noqa: ANN201
    b = GraphBuilder()
    x = b.input((3, 4), DType.FLOAT32)
    y = b.op("neg", (b.op("sin", (x,), (3, 4)),), (3, 4))
    return b.build((y, b.op("relu", (x,), (3, 4))))


def test_the_culprit_is_the_operator_the_root_cause_names_and_cutting_it_keeps_the_rest() -> None:
    graph = sin_neg_graph()
    verdict = Verdict(Symptom.CRASH, Stage.GRAPH_OPTIMIZATION, "faulty-sin-neg", signature="s",
                      message="ValueError: cannot fold op_type: Sin")
    assert culprit_operator(graph, verdict) == "sin"
    smaller, operator = without_culprit(graph, verdict)
    assert operator == "sin" and [n.op for n in smaller.nodes] == ["neg", "relu"]
    unnamed = Verdict(Symptom.CRASH, Stage.GRAPH_OPTIMIZATION, "faulty-sin-neg", signature="s", message="boom")
    assert culprit_operator(graph, unnamed) is None  # a crash that names no operator of a two-operator graph


def run_units(tmp_path: Path, demote_known: bool) -> list[tuple[TestResult, tuple[str, ...]]]:
    """Twelve units of sin and neg through the planted tool: each test's result and its unit's operators."""
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=2, nodes=2,
                          include_ops=("sin", "neg"), check={"input_budget_s": 0.2}, demote_known=demote_known,
                          converters=(FailsOnSinThenNeg.name,))
    post = Collected()
    runner = UnitRunner(config, REGISTRY, post)
    results: list[tuple[TestResult, tuple[str, ...]]] = []
    for idx in range(12):
        runner.run_unit(idx, 100 + idx, (FailsOnSinThenNeg.name,))
        post.flush()
        ops = tuple(node.op for node in generate(100 + idx, config.gen_options(100 + idx)).nodes)
        results += [(m, ops) for m in post.messages if isinstance(m, TestResult) and m.idx == idx]
    return results


@pytest.mark.slow
def test_a_known_bug_is_cut_out_and_the_rest_of_the_graph_tested(tmp_path: Path) -> None:
    results = run_units(tmp_path / "cut", demote_known=True)
    sin = [(r, ops) for r, ops in results if r.is_bug and "Sin" in r.message]
    first = sin[0][0]
    cut = [r for r, _ in results if r.cut_from]
    assert cut, "no graph held sin and more after its bug was filed"
    assert all(r.cut_from == first.signature and f"{CULPRIT_CUT}:sin" in r.labels for r in cut)
    assert all("Sin" not in r.message for r in cut)  # each ended past the filed bug: the Neg bug, or a pass
    assert any("Neg" in r.message and r.is_bug for r in cut)
    # Every bug names the operator it is filed under, for demotion to narrow to (novelty.py).
    assert {r.culprit for r, _ in results if r.is_bug} == {"sin", "neg"}
    assert all(r.culprit == ("sin" if "Sin" in r.message else "neg") for r, _ in results if r.is_bug)
    # A later test still ends in the filed bug only where cutting sin leaves nothing of its graph.
    assert all(set(ops) == {"sin"} for _, ops in sin[1:])
    plain = run_units(tmp_path / "plain", demote_known=False)
    assert not any(r.cut_from for r, _ in plain)
    assert sum(r.is_bug and "Sin" in r.message for r, _ in plain) == len(sin) + len(cut)
