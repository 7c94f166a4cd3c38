"""Dynamic exports: a second shape from z3, both exporters marking dims dynamic, the run at the second shape, and
cases that record, replay and reduce it. Real torch, onnxruntime and z3 throughout."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from fuzzer.cases.case import case_from_result, case_log
from fuzzer.cases.folder import read_case, write_case
from fuzzer.cases.replay import case_expected, replay_verdict
from fuzzer.cases.snippet import render_snippet
from fuzzer.check.judge import judge
from fuzzer.check.pipeline import CheckOptions, check_prepared, prepare, run_check
from fuzzer.check.result import CheckResult, Expected
from fuzzer.converters import CONVERTERS, Role
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript, export_script
from fuzzer.reduce.shrinker import reduce_graph
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.generator import GenOptions, generate
from generators.ir import Graph, Node, TensorType
from generators.materialize import GraphModule, materialize, random_inputs
from generators.second_shape import second_shape
from oracles.dynamic import DYNAMIC_SHAPE, SECOND_SHAPE, TRACED_ONLY
from oracles.verdict import Stage, Symptom

# The exporters with a `dynamic` option: torch.onnx's two.
EXPORTERS = tuple(c.name for c in CONVERTERS.of_role(Role.EXPORTER) if "dynamic" in c.options().to_json())

QUICK = CheckOptions(rerun=False, locate=False, culprit=False)


def relu() -> Graph:
    g = GraphBuilder()
    g.op("relu", (g.input((3, 4)),), (3, 4))
    return g.build()


def add() -> Graph:
    """Two inputs whose dims must stay equal: their batch moves as one."""
    g = GraphBuilder()
    g.op("add", (g.input((3, 5)), g.input((3, 5))), (3, 5))
    return g.build()


def linear_tanh() -> Graph:
    """A batch dim free to move, a feature dim pinned by the weight."""
    g = GraphBuilder()
    x, w, b = g.input((3, 4)), g.weight((6, 4)), g.weight((6,))
    g.op("tanh", (g.op("linear", (x, w, b), (3, 6), bias=True),), (3, 6))
    return g.build()


def pinned_by_weight() -> Graph:
    """Every input dim must equal a weight's (no size-1 dim to broadcast)."""
    g = GraphBuilder()
    g.op("add", (g.input((3, 4)), g.weight((3, 4))), (3, 4))
    return g.build()


def pinned_by_attribute() -> Graph:
    """reshape to a literal shape: the element count is fixed, and no single dim can move."""
    g = GraphBuilder()
    g.nodes.append(Node("reshape", (g.input((2, 6)),), ("t0",), {"shape": (3, 4)}))  # op() takes `shape` itself
    g.types["t0"] = TensorType((3, 4), DType.FLOAT32)
    return g.build()


# ---- the second shape ---------------------------------------------------------------------------------------

def test_a_batch_dim_moves_and_the_eager_module_runs_at_the_second_shape() -> None:
    graph = linear_tanh()
    found = second_shape(graph)
    assert found is not None and found.dims == (("in0", 0),) and found.traced == 3 and found.second != 3
    assert found.graph.nodes == graph.nodes and found.graph.weights == graph.weights
    assert found.graph.inputs["in0"].shape == (found.second, 4) and found.low <= 3 <= found.high
    weights = {w: getattr(materialize(graph, 0), w).detach() for w in graph.weights}
    (out,) = GraphModule(found.graph, weights)(*random_inputs(found.graph, 1).values())
    assert tuple(out.shape) == found.graph.types["t1"].shape == (found.second, 6)


def test_dims_shared_by_several_inputs_move_as_one() -> None:
    found = second_shape(add())
    assert found is not None and found.dims == (("in0", 0), ("in1", 0))
    assert found.graph.inputs["in0"] == found.graph.inputs["in1"]


@pytest.mark.parametrize("graph", [pinned_by_weight(), pinned_by_attribute()], ids=["weight", "attribute"])
def test_a_graph_pinned_by_its_weights_or_attributes_has_no_second_shape(graph: Graph) -> None:
    assert second_shape(graph) is None


@pytest.mark.slow
def test_generated_graphs_find_second_shapes_deterministically() -> None:
    found = 0
    for seed in range(12):
        graph = generate(seed, GenOptions(nodes=6))
        first, again = second_shape(graph), second_shape(graph)
        assert (first is None) == (again is None)
        if first is None or again is None:
            continue
        found += 1
        assert first.graph.dumps() == again.graph.dumps() and first == again
        moved = {name for name, _ in first.dims}
        assert all(graph.inputs[n] != first.graph.inputs[n] for n in moved)
        assert all(graph.inputs[n] == first.graph.inputs[n] for n in graph.inputs if n not in moved)
    assert found >= 9  # of 12: most generated graphs have an input dim no weight or attribute pins


# ---- dynamic exports through the check ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("make", [relu, add, linear_tanh])
def test_a_dynamic_export_of_a_simple_graph_passes_at_both_shapes(exporter: str, make) -> None:
    graph = make()
    static = run_check(graph, 0, exporter, {}, QUICK)
    result = run_check(graph, 0, exporter, {"dynamic": True}, QUICK)
    assert static.verdict.symptom is Symptom.PASS
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    assert "second.runtime" in result.timings and result.second is not None
    assert result.options["dynamic"] is True and TRACED_ONLY not in result.verdict.labels
    assert result.expected is not None and result.expected.second is not None
    traced, second = result.expected.source.inputs[0], result.expected.second.source.inputs[0]
    assert traced.shape != second.shape and result.second.outputs[0].shape == result.expected.second.eager[0].shape


def test_a_prepared_source_is_planned_once_for_all_its_dynamic_checks() -> None:
    """The second shape, its inputs and its source runs are preparation: the first dynamic check of a prepared
    source makes them, the next ones (another exporter, a rerun) reuse them; judging plans nothing."""
    prepared = prepare(linear_tanh(), 0, {}, 1.0)
    assert isinstance(prepared, Expected)
    first = check_prepared(prepared, TorchOnnxScript(), {"dynamic": True}, QUICK)
    again = check_prepared(prepared, TorchOnnxScript(), {"dynamic": True}, QUICK)
    assert first.verdict.symptom is again.verdict.symptom is Symptom.PASS, first.verdict.message
    assert "second.generate" in first.timings and "second.generate" not in again.timings
    assert first.expected is again.expected and first.expected.second is not None
    with pytest.raises(ValueError, match="planned"):
        judge(prepared, TorchOnnxScript(), TorchOnnxScript().options({"dynamic": True}), {})


@pytest.mark.slow
@pytest.mark.parametrize("exporter", EXPORTERS)
def test_generated_graphs_get_verdicts_and_run_the_second_shape_where_the_traced_one_passes(exporter: str) -> None:
    ran = 0
    for seed in range(16):  # many float32 graphs hold an operator an exporter does not support: go on to two runs
        graph = generate(seed, GenOptions(nodes=3, dtypes=(DType.FLOAT32,)))
        result = run_check(graph, seed, exporter, {"dynamic": True}, QUICK)
        assert result.expected is not None and result.expected.source.dynamic is not None
        if result.verdict.symptom is Symptom.PASS and result.expected.second is not None:
            ran += 1
            assert "second.runtime" in result.timings and result.second is not None
        if ran == 2:
            break
    assert ran == 2


def test_without_a_second_shape_the_export_is_dynamic_and_says_only_the_traced_shape_ran() -> None:
    result = run_check(pinned_by_weight(), 0, "torch-onnx-script", {"dynamic": True}, QUICK)
    assert result.verdict.symptom is Symptom.PASS and TRACED_ONLY in result.verdict.labels
    assert result.expected is not None and result.expected.second is None
    axes = result.expected.source.dynamic
    assert axes is not None and not axes.exact and axes.script_axes() == {"in0": {0: "in0_0"}}
    assert "second.generate" in result.timings and "second.runtime" not in result.timings


class StaticDespiteDynamic(TorchOnnxScript):
    """A planted fault: told to export dynamic dims, exports every dim static (a model fixed to the traced shape)."""

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:  # type: ignore[override]
        steps = Steps()
        data = check_and_serialize(export_script(source, dataclasses.replace(options, dynamic=False), steps), steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


def planted_result(graph: Graph, check_options: CheckOptions = QUICK) -> CheckResult:
    prepared = prepare(graph, 0, {}, 1.0)
    return check_prepared(prepared, StaticDespiteDynamic(), ScriptOptions(dynamic=True), check_options)


def test_a_failure_only_at_the_second_shape_is_the_dynamic_exports_own() -> None:
    result = planted_result(linear_tanh(), CheckOptions(rerun=True, locate=False, culprit=False))
    verdict = result.verdict
    assert verdict.symptom is Symptom.CRASH and verdict.stage is Stage.RUNTIME_EXECUTION, verdict.message
    assert {DYNAMIC_SHAPE, SECOND_SHAPE} <= set(verdict.labels)
    assert verdict.signature.startswith(f"{DYNAMIC_SHAPE}-crash-torch-onnx-script-runtime_execution-")
    assert "second.runtime_load" in result.timings and result.failure is not None


class OffAwayFromTheTracedShape(TorchOnnxScript):
    """A planted fault: a dynamic export whose first output gains 1 wherever the batch is not the traced one (a
    shape baked into the model, as a constant-folded Shape would be)."""

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:  # type: ignore[override]
        steps = Steps()
        model = export_script(source, options, steps)
        graph, out = model.graph, model.graph.output[0].name
        for node in graph.node:
            node.output[:] = [f"{o}_raw" if o == out else o for o in node.output]
        traced = source.inputs[0].shape[0]
        graph.initializer.extend([onnx.numpy_helper.from_array(np.array(v), n) for v, n in (
            ([0], "axis0"), ([traced], "traced"), (np.float32(0), "zero"), (np.float32(1), "one"))])
        graph.node.extend([
            onnx.helper.make_node("Shape", [graph.input[0].name], ["shape"]),
            onnx.helper.make_node("Gather", ["shape", "axis0"], ["batch"]),
            onnx.helper.make_node("Equal", ["batch", "traced"], ["same"]),
            onnx.helper.make_node("Where", ["same", "zero", "one"], ["bump"]),
            onnx.helper.make_node("Add", [f"{out}_raw", "bump"], [out])])
        data = check_and_serialize(model, steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


def test_a_divergence_at_the_second_shape_is_rerun_labelled_and_located_there() -> None:
    prepared = prepare(linear_tanh(), 0, {}, 1.0)
    result = check_prepared(prepared, OffAwayFromTheTracedShape(), ScriptOptions(dynamic=True), CheckOptions())
    verdict = result.verdict
    assert verdict.symptom is Symptom.WRONG_VALUES and {DYNAMIC_SHAPE, SECOND_SHAPE} <= set(verdict.labels)
    assert "flaky" not in verdict.labels and "rerun.second.runtime" in result.timings
    # Located: the one-node prefix (linear) diverges at its own second shape the same way.
    assert verdict.diverging_op == "linear" and "first-diverging-prefix:1" in verdict.labels
    assert verdict.signature.startswith(f"{DYNAMIC_SHAPE}-wrong_values-torch-onnx-script-node_conversion-linear-")


# ---- cases: record, replay, repro ----------------------------------------------------------------------------

def run_alone(folder: Path, script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", script], cwd=folder, capture_output=True, text=True, timeout=240,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_dynamic_case_records_and_replays_its_option_and_second_shape(exporter: str, tmp_path: Path) -> None:
    graph = linear_tanh()
    result = run_check(graph, 0, exporter, {"dynamic": True}, QUICK)
    assert result.expected is not None and result.expected.second is not None
    case = case_from_result(result, graph, 0, exporter, {}, log=case_log(result))
    folder = write_case(tmp_path, case)
    assert (folder / "test_data_set_1" / "input_0.pb").exists()
    back = read_case(folder)
    assert back.converter_options["dynamic"] is True and back.dynamic == case.dynamic
    assert back.dynamic is not None and back.dynamic["dims"][0]["axes"] == [["in0", 0]]
    second = result.expected.second.source.inputs[0].numpy()
    assert np.array_equal(back.second_inputs[0], second) and back.second_inputs[0].shape != back.inputs[0].shape
    assert np.array_equal(back.second_expected[0], result.expected.second.eager[0])
    replayed = case_expected(back)
    assert isinstance(replayed, Expected) and replayed.second is not None
    assert torch.equal(replayed.second.source.inputs[0], torch.from_numpy(second))
    verdict = replay_verdict(back)
    assert verdict.symptom is Symptom.PASS and TRACED_ONLY not in verdict.labels
    # repro.py, alone in a copy of the folder, exports dynamic again and runs the model at the second shape.
    work = tmp_path / "alone"
    shutil.copytree(folder, work)
    done = run_alone(work, "repro.py")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"at the second shape [{tuple(second.shape)}]" in done.stdout
    marked = "dynamic_axes" if exporter == "torch-onnx-script" else "dynamic_shapes"
    assert "SECOND_SHAPE = True" in (work / "repro.py").read_text() and marked in (work / "report.md").read_text()


@pytest.mark.slow
def test_a_second_shape_bug_case_shows_the_second_shape_in_its_report_and_snippet(tmp_path: Path) -> None:
    graph = add()
    result = planted_result(graph)
    case = case_from_result(result, graph, 0, "torch-onnx-script", {}, log=case_log(result))
    folder = write_case(tmp_path, case)
    report = (folder / "report.md").read_text()
    assert "dynamic_axes=" in report and "only there does it fail" in report and len(report.splitlines()) <= 80
    snippet = render_snippet(read_case(folder))
    assert snippet is not None and len(snippet.splitlines()) <= 30
    assert "the dynamic model runs at a second shape" in snippet
    # The real exporter marks the dims the planted one dropped: alone, the snippet runs both shapes and passes.
    (folder / "snippet.py").write_text(snippet)
    done = run_alone(folder, "snippet.py")
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_static_case_keeps_its_layout(tmp_path: Path) -> None:
    graph = relu()
    result = run_check(graph, 0, "torch-onnx-script", {}, QUICK)
    folder = write_case(tmp_path, case_from_result(result, graph, 0, "torch-onnx-script", {}))
    back = read_case(folder)
    assert back.dynamic is None and back.second_inputs == () and not (folder / "test_data_set_1").exists()
    assert "SECOND_SHAPE = False" in (folder / "repro.py").read_text()


# ---- reduction ---------------------------------------------------------------------------------------------

def test_a_dynamic_bug_reduces_and_each_candidate_finds_its_own_second_shape() -> None:
    g = GraphBuilder()
    x, w = g.input((3, 4)), g.weight((5, 4))
    hidden = g.op("tanh", (g.op("linear", (x, w), (3, 5), bias=False),), (3, 5))
    g.op("add", (g.op("sigmoid", (hidden,), (3, 5)), g.input((3, 5))), (3, 5))
    graph = g.build()
    original = planted_result(graph).verdict
    assert DYNAMIC_SHAPE in original.labels

    def same_bug(candidate: Graph) -> bool:
        return planted_result(candidate).verdict.signature == original.signature

    reduced = reduce_graph(graph, 0, same_bug, 60.0).graph
    assert len(reduced.nodes) < len(graph.nodes) and same_bug(reduced)
    assert second_shape(reduced) is not None
