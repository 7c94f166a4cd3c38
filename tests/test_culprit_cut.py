"""A test that ends in a bug already filed is run again without that bug's culprit operator, so the rest of its graph
is tested; the filed bug still counts the hit. The bugs are planted through the registry: an ONNX tool that fails on
any model holding a Sin node, and on one holding a Neg node with another message; and one whose error on a Sin node
names no operator, whose culprit is known only once its filed case is reduced."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.policy.culprit_cut import (
    CULPRIT_AVOIDED,
    CULPRIT_CUT,
    CULPRIT_GUESSED,
    CUT_TIMER,
    avoided_culprits,
    culprit_operator,
    known_culprits,
    reduced_culprit,
    without_culprit,
)
from fuzzer.campaign.policy.novelty import AVOID_FOR
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.case import case_id
from fuzzer.cases.folder import read_case
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.reduce.case import reduce_case
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker, Job
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


class FailsOnSinUnnamed(OnnxPassConverter):
    """An ONNX tool that refuses a Sin node with an error naming no operator (as most of onnx2tf's do)."""

    name = "faulty-sin-unnamed"
    libraries = ("onnxruntime",)
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(node.op_type == "Sin" for node in model.graph.node):
            raise ValueError("the pass gave up")
        return model


REGISTRY = ConverterRegistry([FailsOnSinThenNeg(), FailsOnSinUnnamed()])


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
    assert [n.op for n in without_culprit(graph, "sin").nodes] == ["neg", "relu"]
    sin_alone = without_culprit(without_culprit(graph, "neg"), "relu")
    assert [n.op for n in sin_alone.nodes] == ["sin"] and without_culprit(sin_alone, "sin") is None
    unnamed = Verdict(Symptom.CRASH, Stage.GRAPH_OPTIMIZATION, "faulty-sin-neg", signature="s", message="boom")
    assert culprit_operator(graph, unnamed) is None  # a crash that names no operator of a two-operator graph


def run_units(tmp_path: Path, demote_known: bool, converter: str = FailsOnSinThenNeg.name
              ) -> list[tuple[TestResult, tuple[str, ...]]]:
    """Twelve units of sin and neg through a planted tool: each test's result and its unit's operators."""
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=2, nodes=2,
                          include_ops=("sin", "neg"), check={"input_budget_s": 0.2}, demote_known=demote_known,
                          converters=(converter,))
    post = Collected()
    runner = UnitRunner(config, REGISTRY, post)
    results: list[tuple[TestResult, tuple[str, ...]]] = []
    for idx in range(12):
        runner.run_unit(idx, 100 + idx, (converter,))
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
    # The retest's own steps are booked by name inside the cut's timer, the preparation of the cut graph too.
    assert all({f"{CUT_TIMER}.transform", f"{CUT_TIMER}.inputs", CUT_TIMER} <= set(r.timings) for r in cut)
    # Every bug names the operator it is filed under, for demotion to narrow to (novelty.py).
    assert {r.culprit for r, _ in results if r.is_bug} == {"sin", "neg"}
    assert all(r.culprit == ("sin" if "Sin" in r.message else "neg") for r, _ in results if r.is_bug)
    # A later test still ends in the filed bug only where cutting sin leaves nothing of its graph.
    assert all(set(ops) == {"sin"} for _, ops in sin[1:])
    plain = run_units(tmp_path / "plain", demote_known=False)
    assert not any(r.cut_from for r, _ in plain)
    assert sum(r.is_bug and "Sin" in r.message for r, _ in plain) == len(sin) + len(cut)


@pytest.mark.slow
def test_an_error_that_names_no_operator_is_cut_by_its_reduced_case(tmp_path: Path) -> None:
    name = FailsOnSinUnnamed.name
    with IsolatedChecker(CheckerConfig(registry="test_culprit_cut:REGISTRY", timeout_s=60.0)) as checker:
        job = Job(sin_neg_graph(), 7, name, {})
        signature = checker.verdict(job).signature
        folder, verdict = checker.write_case(job, tmp_path, case_id(signature), None, None)
        assert verdict.signature == signature and culprit_operator(sin_neg_graph(), verdict) is None
        assert reduced_culprit(folder) is None  # filed, not reduced yet
        reduce_case(read_case(folder), folder, checker, budget_s=60.0)
    assert reduced_culprit(folder) == "sin"
    # A campaign of its own, where the case its first hit files stays unreduced: the error names nothing, no cut.
    unreduced = run_units(tmp_path / "unreduced", demote_known=True, converter=name)
    assert [r for r, _ in unreduced if r.is_bug] and not any(r.cut_from for r, _ in unreduced)
    results = [(r, ops) for r, ops in run_units(tmp_path, demote_known=True, converter=name)  # beside the reduced case
               if not r.message.startswith("upstream ")]  # the tool's tests, not its upstream exporter's failures
    sin_and_more = [r for r, ops in results if "sin" in ops and set(ops) != {"sin"}]
    assert sin_and_more, "no unit held sin beside another operator"
    # Each ended past the filed bug, the rest of its graph (neg alone) passing; the filed bug still counts the hit.
    assert all(r.cut_from == signature and f"{CULPRIT_CUT}:sin" in r.labels and not r.is_bug for r in sin_and_more)
    assert all(r.is_bug == (set(ops) == {"sin"}) for r, ops in results)


@pytest.mark.slow
def test_a_demoted_culprit_is_cut_out_before_its_own_converter_runs(tmp_path: Path) -> None:
    """The campaign sends (AVOID_FOR + converter, operator) once that converter's bug on the operator is demoted:
    that converter tests each graph without it from the start, the other converters the whole graph."""
    avoiding, other = FailsOnSinThenNeg.name, FailsOnSinUnnamed.name
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=2, nodes=2,
                          include_ops=("sin", "neg"), check={"input_budget_s": 0.2}, demote_known=True,
                          converters=(avoiding, other))
    post = Collected()
    runner = UnitRunner(config, REGISTRY, post)
    demoted = [(AVOID_FOR + avoiding, "sin", 1.0)]
    by_ops: dict[tuple[str, ...], list[TestResult]] = {}
    for idx in range(12):
        runner.run_unit(idx, 100 + idx, (avoiding, other), demoted)
        post.flush()
        ops = tuple(sorted(set(generate(100 + idx, config.gen_options(100 + idx)).ops())))
        tests = {m.converter: m for m in post.messages if isinstance(m, TestResult) and m.idx == idx}
        by_ops.setdefault(ops, []).append(tests[avoiding])
        if "sin" in ops:  # the other converter meets sin as ever (or its upstream exporter fails first)
            assert ("gave up" in tests[other].message) == tests[other].is_bug != tests[other].message.startswith(
                "upstream ")
            assert not any(CULPRIT_AVOIDED in label for label in tests[other].labels)
    assert set(by_ops) == {("neg", "sin"), ("sin",), ("neg",)}
    for result in by_ops[("neg", "sin")]:  # sin cut out first: the Neg bug shows, where the upstream exports neg
        assert f"{CULPRIT_AVOIDED}:sin" in result.labels and not result.cut_from
        assert result.message.startswith("upstream ") or (result.is_bug and "Neg" in result.message)
    assert any(r.is_bug and {CULPRIT_AVOIDED, f"{CULPRIT_AVOIDED}.inputs"} <= set(r.timings)
               for r in by_ops[("neg", "sin")])
    for result in by_ops[("sin",)]:  # nothing left once sin is cut: not run
        assert result.symptom == Symptom.UNSUPPORTED.json_name and result.labels == (f"skipped-{CULPRIT_AVOIDED}",)
    for result in by_ops[("neg",)]:  # nothing to avoid
        assert result.is_bug and not any(CULPRIT_AVOIDED in label for label in result.labels)
    assert avoided_culprits(sin_neg_graph(), avoiding, 5, [(AVOID_FOR + avoiding, "sin", 0.0)]) == []
    assert avoided_culprits(sin_neg_graph(), other, 5, demoted) == []


@pytest.mark.slow
def test_a_filed_bug_that_names_no_operator_is_cut_by_its_converters_known_culprits(tmp_path: Path) -> None:
    """No reduced case names the culprit of the unnamed Sin bug, but `sin` is cut out for its converter (a spread
    bug's cover, say; drawn never here, so the tests meet the bug): a test that hits it again runs without `sin`."""
    name = FailsOnSinUnnamed.name
    demoted = [(AVOID_FOR + name, "sin", 0.0), (AVOID_FOR + "another-converter", "neg", 1.0)]
    assert known_culprits(sin_neg_graph(), name, demoted) == ["sin"]
    assert known_culprits(sin_neg_graph(), "another-converter", demoted) == ["neg"]
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=2, nodes=2,
                          include_ops=("sin", "neg"), check={"input_budget_s": 0.2}, demote_known=True,
                          converters=(name,))
    post = Collected()
    runner = UnitRunner(config, REGISTRY, post)
    results: list[tuple[TestResult, set[str]]] = []
    for idx in range(12):
        runner.run_unit(idx, 100 + idx, (name,), demoted)
        post.flush()
        ops = set(generate(100 + idx, config.gen_options(100 + idx)).ops())
        results += [(m, ops) for m in post.messages if isinstance(m, TestResult) and m.idx == idx
                    and not m.message.startswith("upstream ")]
    filed = next(r.signature for r, _ in results if r.is_bug)
    guessed = [r for r, ops in results if r.cut_from]
    assert guessed, "no graph held sin and neg after the bug was filed"
    assert all(r.cut_from == filed and r.labels == (f"{CULPRIT_GUESSED}:sin",) and not r.is_bug for r in guessed)
    # A guess is never sent as the filed bug's culprit: only a one-operator graph names its own.
    assert all(r.culprit == ("sin" if ops == {"sin"} and r.is_bug else "") for r, ops in results)
