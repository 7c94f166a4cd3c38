"""The pattern operators (generators/ops/patterns.py): each one's native model runs in ONNX Runtime with
optimizations off and matches torch, and every rewrite its class declares happens: the named tool turns the model
into exactly the declared node types, and the rewritten model still matches torch."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from fuzzer.converters.runtime import SESSION_LEVELS, make_session, run_session
from fuzzer.support.tensors import to_oracle_array
from generators.dtypes import DType
from generators.generator import GenerationError, GenOptions, generate
from generators.ir import Graph
from generators.materialize import GraphModule, materialize
from generators.onnx_native import NATIVE_OPSETS, native_gen_options, native_nodes, native_ops, to_onnx_model
from generators.ops.base import OpSpec
from generators.ops.patterns import Pattern, Rewrite
from generators.registry import REGISTRY
from generators.valid_inputs import find_valid_inputs
from oracles.compare import compare

PATTERNS = sorted(name for name, op in REGISTRY.items() if isinstance(op, Pattern))
REWRITES = [(name, rewrite) for name in PATTERNS for rewrite in REGISTRY[name].rewrites]
TOOLS = ("ort", "onnxoptimizer", "onnxsim", "onnxslim")
SEEDS = (0, 1, 2)
GRAPH_TRIES = 40


def pattern_graph(op: OpSpec, seed: int) -> Graph | None:
    """A one-node graph of `op` whose data is float32 (conditions bool), written natively at both ends of the
    native opsets."""
    for attempt in range(GRAPH_TRIES):
        try:
            graph = generate(seed * 1000 + attempt, GenOptions(nodes=1, include_ops=(op.name,), max_numel=256,
                                                               max_dim=8, dtypes=(DType.FLOAT32, DType.BOOL)))
        except GenerationError:
            continue
        node = graph.nodes[0]
        dtypes = [graph.types[n].dtype for n in node.inputs]
        if node.op != op.name or DType.FLOAT32 not in dtypes or graph.types[node.outputs[0]].dtype != DType.FLOAT32:
            continue
        if op.name == "pattern_rms_norm" and graph.types[node.inputs[0]].rank == 1 and node.attrs["scale_first"]:
            continue  # onnxruntime 1.32 fuses this shape into a model it cannot load: a bug, not the rewrite's test
        if all(native_nodes(graph, opset) is not None for opset in NATIVE_OPSETS):
            return graph
    return None


class Example:
    """One pattern graph with valid inputs, its weights and torch's outputs (attributes as given, and rounded as
    ONNX stores them: the oracle accepts either)."""

    def __init__(self, op: OpSpec, seed: int) -> None:
        graph = pattern_graph(op, seed)
        assert graph is not None, f"no float32 graph of {op.name} for seed {seed}"
        module = materialize(graph, seed)
        found = find_valid_inputs(module, seed, budget_s=1.0)
        self.graph = graph
        self.inputs = tuple(found.inputs[n] for n in graph.inputs)
        self.weights = {w: to_oracle_array(getattr(module, w))[0] for w in graph.weights}
        tensors = {w: getattr(module, w).detach() for w in graph.weights}
        with torch.no_grad():
            self.expected = [[to_oracle_array(x)[0] for x in GraphModule(graph, tensors, float32_attrs=r)(*self.inputs)]
                             for r in (False, True)]

    def model(self, opset: int) -> onnx.ModelProto:
        model = to_onnx_model(self.graph, self.weights, opset)
        assert model is not None
        return model

    def check(self, outputs: tuple[np.ndarray, ...], what: str) -> None:
        for i, name in enumerate(self.graph.outputs):
            dtype = self.graph.types[name].dtype.value
            results = [compare(np.asarray(outputs[i]), e[i], dtype) for e in self.expected]
            assert any(r.ok for r in results), f"{what}: {results[0]}"

    def run(self, model: onnx.ModelProto) -> tuple[np.ndarray, ...]:
        return run_session(make_session(model.SerializeToString()), list(self.graph.inputs), self.inputs)[0]


def rewritten(model: onnx.ModelProto, rewrite: Rewrite, tmp_path: Path) -> onnx.ModelProto:
    """The model as the rewrite's tool leaves it: ONNX Runtime's optimized model file at the level, onnxoptimizer's
    passes ('+'-joined), or onnxsim's or onnxslim's default simplification."""
    if rewrite.tool == "ort":
        options = ort.SessionOptions()
        options.graph_optimization_level = SESSION_LEVELS[rewrite.setting]
        options.intra_op_num_threads = 1
        options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath)
    if rewrite.tool == "onnxoptimizer":
        import onnxoptimizer
        return onnxoptimizer.optimize(model, rewrite.setting.split("+"))
    if rewrite.tool == "onnxsim":
        import onnxsim
        return onnxsim.simplify(model, check_n=0)[0]
    import onnxslim
    return onnxslim.slim(model)


def test_every_pattern_is_registered_with_a_counterpart_and_declares_its_rewrites() -> None:
    assert len(PATTERNS) >= 10
    for name in PATTERNS:
        op = REGISTRY[name]
        assert op.family == "pattern" and op.rewrites, name
        assert name in native_ops(NATIVE_OPSETS[0]), name
        assert all(r.tool in TOOLS and r.op_types for r in op.rewrites), name
    assert {r.tool for _, r in REWRITES} >= {"ort", "onnxoptimizer", "onnxsim"}
    assert len(PATTERNS) < len(REGISTRY) / 8  # the generator draws ops uniformly: patterns never dominate


@pytest.mark.slow
@pytest.mark.parametrize("name", PATTERNS)
def test_every_pattern_runs_unoptimized_and_matches_torch(name: str) -> None:
    op = REGISTRY[name]
    for seed in SEEDS:
        example = Example(op, seed)
        for opset in NATIVE_OPSETS:
            model = example.model(opset)
            op_types = [n.op_type for n in model.graph.node if n.op_type != "Constant"]
            assert len(op_types) >= 2, f"{name}: a pattern is a subgraph, not {op_types}"
            example.check(example.run(model), f"{name} seed {seed} opset {opset}")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "rewrite"), REWRITES, ids=[f"{n}-{r.tool}" for n, r in REWRITES])
def test_every_declared_rewrite_happens_and_keeps_the_outputs(name: str, rewrite: Rewrite, tmp_path: Path) -> None:
    pytest.importorskip({"ort": "onnxruntime"}.get(rewrite.tool, rewrite.tool))
    op = REGISTRY[name]
    for seed in SEEDS:
        example = Example(op, seed)
        for opset in NATIVE_OPSETS:
            model = example.model(opset)
            result = rewritten(model, rewrite, tmp_path)
            got = Counter(n.op_type for n in result.graph.node)
            what = f"{name} seed {seed} opset {opset} {rewrite.tool} {rewrite.setting} {example.graph.nodes[0].attrs}"
            assert got == Counter(rewrite.op_types), f"{what}: {sorted(got.elements())}"
            if rewrite.tool != "ort":  # ONNX Runtime's file holds its contrib ops; its own run checks the outputs
                example.check(example.run(result), what)
            else:
                level_session = make_session(model.SerializeToString(), rewrite.setting)
                example.check(run_session(level_session, list(example.graph.inputs), example.inputs)[0], what)


def test_native_graphs_draw_pattern_operators() -> None:
    """Random native graphs hold pattern operators now and then, never mostly."""
    opts = native_gen_options(GenOptions(nodes=6))
    assert opts is not None and set(PATTERNS) <= set(opts.include_ops)
    drawn = Counter(node.op for seed in range(40) for node in generate(seed, opts).nodes)
    patterns = sum(count for op, count in drawn.items() if op in PATTERNS)
    assert 0 < patterns < sum(drawn.values()) / 4


RECORDED = [(name, r) for name, r in REWRITES if r.fired_as and r.tool in ("ort", "onnxoptimizer", "onnxslim")]


@pytest.mark.parametrize("name,rewrite", RECORDED, ids=[f"{n}-{r.tool}" for n, r in RECORDED])
def test_each_rewrite_is_recorded_under_its_name(name: str, rewrite: Rewrite) -> None:
    """The coverage a campaign records (fuzzer/campaign/rewrites.py) names this pattern's rewrite when it happens,
    and the name is one the installed library lists."""
    from fuzzer.converters import CONVERTERS
    from fuzzer.converters.runtime import graph_transformers, logged_session

    model = Example(REGISTRY[name], 0).model(17)
    if rewrite.tool == "ort":
        _, fired = logged_session(model.SerializeToString(), rewrite.setting)
        known = graph_transformers()
    elif rewrite.tool == "onnxslim":
        slim = CONVERTERS["onnxslim"]
        fired, known = slim.fired(model, slim.options({})), slim.rewrite_names()
    else:
        optimizer = CONVERTERS["onnxoptimizer"]
        fired = optimizer.fired(model, optimizer.options({"passes": [rewrite.setting]}))
        known = optimizer.rewrite_names()
    assert rewrite.fired_as in fired and rewrite.fired_as in known
