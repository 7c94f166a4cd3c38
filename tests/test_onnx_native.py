"""The graph materialized straight to ONNX: every operator's counterpart checked against torch at its oldest and
newest opset; the "onnx-native" upstream through the pipeline for every ONNX tool; which graphs and seeds start from
it; its disputed baselines; and a native case's report and standalone repro.py."""

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

from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.case import case_from_result, collect_versions
from fuzzer.cases.folder import write_case
from fuzzer.check.pipeline import CheckOptions, run_check
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import Source, Steps, UpstreamError
from fuzzer.converters.native import DISPUTED, NATIVE, second_opinion
from fuzzer.converters.runtime import make_session, run_model, run_session, validate
from fuzzer.converters.upstream import UpstreamOptions, starts_upstream
from fuzzer.support.tensors import to_oracle_array
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.generator import GenOptions, generate, single_op_graph
from generators.ir import Graph
from generators.materialize import GraphModule, materialize
from generators.onnx_native import (
    NATIVE_OPSETS,
    native_gen_options,
    native_ops,
    native_opsets,
    node_calls,
    to_onnx_model,
)
from generators.ops.base import OpSpec
from generators.ops.onnx_nodes import OLDEST_OPSET, OnnxCall
from generators.registry import REGISTRY
from generators.valid_inputs import find_valid_inputs
from oracles.compare import compare
from oracles.taxonomy import upstream_verdict
from oracles.verdict import Stage, Symptom

OLDEST, NEWEST = NATIVE_OPSETS
NATIVE_OPS = sorted(native_ops(NEWEST))
GRAPH_TRIES = 12  # one-node graphs tried per dtype: some attributes have no counterpart (pooling's ceil_mode)
ONNX_TOOLS = [name for name, c in CONVERTERS.items() if starts_upstream(c)]


def counterpart_opsets(op: OpSpec) -> tuple[int, int]:
    """The oldest and newest opset at which `op` has a counterpart."""
    return max(op.onnx_since or OLDEST, OLDEST), NEWEST


def mapped_graph(op: OpSpec, dtype: DType) -> Graph | None:
    """A one-node graph of `op` on `dtype` whose attributes have a counterpart at both ends of its opsets."""
    for seed in range(GRAPH_TRIES):
        graph = single_op_graph(op, dtype, seed)
        if graph is not None and all(native_opsets_of(graph, opset) for opset in counterpart_opsets(op)):
            return graph
    return None


def native_opsets_of(graph: Graph, opset: int) -> bool:
    return all(op.to_onnx(attrs, call) is not None for op, attrs, call in node_calls(graph, opset))


def eager_outputs(graph: Graph, module: GraphModule, inputs: tuple[torch.Tensor, ...],
                  float32_attrs: bool) -> list[np.ndarray]:
    """The graph's outputs in torch, with the attributes ONNX stores as float32 rounded so when asked (the oracle
    accepts either)."""
    weights = {w: getattr(module, w).detach() for w in graph.weights}
    with torch.no_grad():
        return [to_oracle_array(x)[0] for x in GraphModule(graph, weights, float32_attrs=float32_attrs)(*inputs)]


def settled(op: OpSpec, graph: Graph, outputs: list[np.ndarray], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Outputs with what torch leaves unspecified (which of tied indices) settled, as the oracle does."""
    node = graph.nodes[0]
    given = inputs if op.settles_output else []
    return [op.canonical_output(node.attrs, i, x, given) for i, x in enumerate(outputs)]


@pytest.mark.slow
@pytest.mark.parametrize("name", NATIVE_OPS)
def test_every_counterpart_runs_and_matches_torch_at_its_oldest_and_newest_opset(name: str) -> None:
    """Each dtype ONNX Runtime runs the operator's counterpart for: the one-node graph's native model passes the
    full checker and strict shape inference, runs with optimizations off, and matches eager torch."""
    op = REGISTRY[name]
    dtypes = [d for d in dict.fromkeys(s.ins[0] if s.ins else s.out for s in op.sigs) if d in op.onnx_types]
    checked = 0
    for dtype in dtypes:
        graph = mapped_graph(op, dtype)
        if graph is None:
            continue
        module = materialize(graph, 0)
        found = find_valid_inputs(module, 0, budget_s=1.0)
        inputs = tuple(found.inputs[n] for n in graph.inputs)
        values = {**{n: to_oracle_array(x)[0] for n, x in zip(graph.inputs, inputs, strict=True)},
                  **{w: to_oracle_array(getattr(module, w))[0] for w in graph.weights}}
        node_inputs = [values[n] for n in graph.nodes[0].inputs]
        expected = [settled(op, graph, eager_outputs(graph, module, inputs, rounded), node_inputs)
                    for rounded in (False, True)]
        for opset in counterpart_opsets(op):
            model = to_onnx_model(graph, {w: values[w] for w in graph.weights}, opset)
            assert model is not None, f"{name} {dtype.value} at opset {opset}"
            validate(model)
            got, declared = run_session(make_session(model.SerializeToString()), list(graph.inputs), inputs)
            got = settled(op, graph, list(got), node_inputs)
            for i, out in enumerate(graph.outputs):
                want = graph.types[out].dtype.value
                assert declared[i] == want, f"{name} {dtype.value} opset {opset}: {out} is {declared[i]}"
                results = [compare(got[i], e[i], want) for e in expected]
                assert any(r.ok for r in results), f"{name} {dtype.value} opset {opset}: {results[0]}"
        checked += 1
    assert checked, f"no one-node graph of {name} has a counterpart"


@pytest.mark.slow
def test_native_ops_lists_exactly_the_operators_whose_counterpart_returns_nodes() -> None:
    """An operator outside native_ops(opset) returns no nodes at that opset, whatever its graph; the ones inside
    return nodes (the test above)."""
    assert len(NATIVE_OPS) >= 40
    for name, op in REGISTRY.items():
        dtype = next(s.ins[0] if s.ins else s.out for s in op.sigs)
        graph = single_op_graph(op, dtype, 0)
        if graph is None:
            continue
        for opset in (OLDEST, 17, 18, NEWEST):
            made = [o.to_onnx(attrs, call) for o, attrs, call in node_calls(graph, opset)]
            if name not in native_ops(opset):
                assert made == [None], f"{name} has nodes at opset {opset} but is not listed"
    assert native_ops(OLDEST_OPSET - 1) == frozenset()


def native_graph(opset: int = 17, nodes: int = 6, patterns: bool = True) -> tuple[Graph, int]:
    """A graph of operators with counterparts that can be written at `opset` (pattern operators among them unless
    `patterns` is False: they are built to meet the optimizers' bugs), and its seed."""
    excluded = () if patterns else tuple(op.name for op in REGISTRY.values() if op.family == "pattern")
    opts = native_gen_options(GenOptions(nodes=nodes, exclude_ops=excluded))
    assert opts is not None
    for seed in range(50):
        graph = generate(seed, opts)
        if opset in native_opsets(graph):
            return graph, seed
    raise AssertionError("no native graph in 50 seeds")


@pytest.mark.parametrize("name", ONNX_TOOLS)
def test_every_onnx_tool_runs_from_the_native_model_through_the_pipeline(name: str) -> None:
    converter = CONVERTERS[name]
    ok, reason = converter.availability()
    if not ok:
        pytest.skip(reason)
    graph, seed = native_graph()
    result = run_check(graph, seed, name, {"upstream": NATIVE, "opset": 17}, CheckOptions(rerun=False))
    assert result.verdict.stage is not Stage.SOURCE, result.verdict.message
    assert result.options["upstream"] == NATIVE and result.options["opset"] == 17
    if result.target is not None and result.target.baseline_model is not None:
        received = onnx.load_from_string(result.target.baseline_model)
        assert received.producer_name == "convsmith" and received.opset_import[0].version == 17


def test_a_graph_with_an_operator_without_a_counterpart_never_starts_native() -> None:
    g = GraphBuilder()
    a = g.input((3, 4))
    g.op("relu", (g.op("floor_divide", (a, g.input((3, 4))), (3, 4)),), (3, 4))  # ONNX has no floor division
    graph = g.build()
    assert native_opsets(graph) == () and to_onnx_model(graph, {}, 17) is None
    config = WorkerConfig(out_dir="o", log_dir="l", vary_settings=True, converters=tuple(CONVERTERS))
    for seed in range(60):
        for name in ONNX_TOOLS:
            assert config.options_for(CONVERTERS[name], seed, graph)["upstream"] != NATIVE
        assert UpstreamOptions.draw(seed, None, graph).upstream != NATIVE
    # Pinned there anyway, it cannot start: an unsupported upstream, never the tool's bug.
    verdict = run_check(graph, 0, "ort-optimizer", {"upstream": NATIVE, "opset": 17}).verdict
    assert (verdict.symptom, verdict.stage, verdict.is_bug) == (Symptom.UNSUPPORTED, Stage.SOURCE, False)
    assert "floor_divide" in verdict.message


@pytest.mark.slow
def test_a_seed_draws_its_native_graph_and_upstream_reproducibly() -> None:
    config = WorkerConfig(out_dir="o", log_dir="l", nodes=6, vary_settings=True, converters=tuple(CONVERTERS))
    tools = [CONVERTERS[name] for name in ONNX_TOOLS]
    natives = 0
    for seed in range(40):
        opts = config.gen_options(seed)
        assert opts == config.gen_options(seed)
        graph = generate(seed, opts)
        assert graph.dumps() == generate(seed, config.gen_options(seed)).dumps()
        drawn = [config.options_for(tool, seed, graph) for tool in tools]
        assert drawn == [config.options_for(tool, seed, graph) for tool in tools]
        assert len({(o["upstream"], o["opset"]) for o in drawn}) == 1  # the tools of a graph share one upstream
        if drawn[0]["upstream"] == NATIVE:
            natives += 1
            assert drawn[0]["opset"] in native_opsets(graph)
            assert set(graph.ops()) <= set(NATIVE_OPS)
    assert natives >= 4
    # A config written before the field (no converters) makes the graphs it always made; so does a campaign
    # without an ONNX tool.
    for old in (WorkerConfig(out_dir="o", log_dir="l", nodes=6),
                WorkerConfig(out_dir="o", log_dir="l", nodes=6, converters=("torch-onnx-dynamo",))):
        assert all(old.gen_options(seed).include_ops == () for seed in range(40))
    # A pinned upstream is kept.
    pinned = dataclasses.replace(config, converter_options={"onnxsim": {"upstream": "torch-onnx-script"}})
    assert {pinned.options_for(CONVERTERS["onnxsim"], s, generate(s, pinned.gen_options(s)))["upstream"]
            for s in range(40)} == {"torch-onnx-script"}


def test_a_baseline_onnx_runtime_and_the_reference_evaluator_disagree_on_stops_at_the_source() -> None:
    """ONNX Runtime 1.32's float64 Shrink goes through float32 (the reason hardshrink's counterpart leaves float64
    out): a native model of it has a baseline onnx.reference and PyTorch both dispute."""
    g = GraphBuilder()
    g.op("hardshrink", (g.input((16,), DType.FLOAT64),), (16,), DType.FLOAT64, lambd=0.5)
    graph = g.build()
    call = OnnxCall(graph.nodes[0].inputs, graph.nodes[0].outputs, (graph.types["in0"],), (graph.types["t0"],), 17)
    nodes = REGISTRY["hardshrink"].onnx_nodes(graph.nodes[0].attrs, call)  # past to_onnx's dtype check
    assert nodes is not None and REGISTRY["hardshrink"].to_onnx(graph.nodes[0].attrs, call) is None
    model = onnx.helper.make_model(onnx.helper.make_graph(
        nodes, "g", [onnx.helper.make_tensor_value_info("in0", onnx.TensorProto.DOUBLE, [16])],
        [onnx.helper.make_tensor_value_info("t0", onnx.TensorProto.DOUBLE, [16])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    x = torch.linspace(-1.37, 1.91, 16, dtype=torch.float64)
    source = Source(graph, materialize(graph, 0), (x,))
    outputs, _ = run_model(model.SerializeToString(), source, Steps())
    with pytest.raises(UpstreamError) as raised:
        second_opinion(model, source, outputs, Steps())
    exc = raised.value
    verdict = upstream_verdict("onnxsim", exc.upstream, exc.failure, exc.labels, exc.symptom)
    assert (verdict.stage, verdict.symptom, verdict.is_bug) == (Stage.SOURCE, Symptom.WRONG_VALUES, False)
    assert DISPUTED in verdict.labels and f"upstream:{NATIVE}" in verdict.labels


@pytest.mark.slow
def test_a_native_case_writes_a_report_and_a_repro_that_runs_alone(tmp_path: Path) -> None:
    """The case of an ONNX tool that started from the native model keeps it as upstream.onnx; its report's snippet
    and its repro.py start there, without torch or convsmith."""
    from fuzzer.cases.report import render_report

    graph, seed = native_graph(patterns=False)
    options = {"upstream": NATIVE, "opset": 17, "level": "all"}
    result = run_check(graph, seed, "ort-optimizer", options, CheckOptions(rerun=False))
    case = case_from_result(result, graph, seed, "ort-optimizer", collect_versions(("onnxruntime",)))
    case = dataclasses.replace(case, id="native-case", signature="native-case")
    assert case.upstream_model is not None
    assert onnx.load_from_string(case.upstream_model).producer_name == "convsmith"
    folder = write_case(tmp_path / "cases", case)
    assert (folder / "upstream.onnx").exists() and (folder / "report.md").exists()
    report = render_report(case)
    assert 'onnx.load("upstream.onnx")' in report and "import torch" not in report
    alone = tmp_path / "alone"
    shutil.copytree(folder, alone)
    done = subprocess.run([sys.executable, "-I", "repro.py"], cwd=alone, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]  # the check passed: no bug to show
    assert "starting from upstream.onnx" in done.stdout and "bug does not show" in done.stdout
