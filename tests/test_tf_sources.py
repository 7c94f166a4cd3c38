"""Every operator's TensorFlow source (OpSpec.tf_source) run by TensorFlow eager against its torch forward, and its
float64 twin against torch's; a whole random graph rendered by generators/tf_model.py against the torch module."""

from __future__ import annotations

import json
import re
from types import ModuleType

import numpy as np
import pytest
import torch

from fuzzer.support.tensors import to_oracle_array
from generators.dtypes import DType
from generators.generator import GenOptions, generate, single_op_graph
from generators.ir import Graph
from generators.materialize import GraphModule, float64_twin, materialize, widen_inputs
from generators.registry import REGISTRY
from generators.tf_model import (
    module_weights,
    render_tf_model,
    run_tf_eager,
    run_tf_float64,
    tf_signature,
    tf_unsupported,
)
from generators.valid_inputs import find_valid_inputs
from oracles.compare import compare

SEEDS = (0, 1)
TF_OPS = [name for name, op in REGISTRY.items() if op.has_tf_source()]


@pytest.fixture(scope="module")
def tf() -> ModuleType:
    """TensorFlow, imported once for the module (about 3 s)."""
    return pytest.importorskip("tensorflow")


def torch_outputs(module: GraphModule, inputs: tuple[torch.Tensor, ...], widen: bool) -> list[np.ndarray]:
    with torch.no_grad():
        run = float64_twin(module) if widen else module
        return [to_oracle_array(y)[0] for y in run(*(widen_inputs(inputs) if widen else inputs))]


def assert_matches(graph: Graph, module: GraphModule, inputs: tuple[torch.Tensor, ...], what: str) -> None:
    """TensorFlow eager equals the torch module (exact for ints and bools), and so do their float64 twins."""
    arrays = [to_oracle_array(x)[0] for x in inputs]
    weights = module_weights(module, graph)
    for widen, run in ((False, run_tf_eager), (True, run_tf_float64)):
        got, expected = run(graph, weights, arrays), torch_outputs(module, inputs, widen)
        assert len(got) == len(expected) == len(graph.outputs), what
        for name, actual, wanted in zip(graph.outputs, got, expected, strict=True):
            dtype = graph.types[name].dtype
            result = compare(actual, wanted, "float64" if widen and dtype.is_float else dtype.value)
            assert result.ok, f"{what} {'float64 twin ' if widen else ''}{name}: {result.to_json()}"


@pytest.mark.slow
@pytest.mark.parametrize("op_name", TF_OPS)
def test_every_tf_source_equals_the_torch_forward(tf: ModuleType, op_name: str) -> None:
    op = REGISTRY[op_name]
    checked = 0
    for dtype in dict.fromkeys(s.key_dtype for s in op.sigs):
        for seed in SEEDS:
            graph = single_op_graph(op, dtype, seed)
            if graph is None or tf_unsupported(graph) is not None:
                continue
            module = materialize(graph, seed)
            inputs = tuple(find_valid_inputs(module, seed, budget_s=1.0).inputs.values())
            assert_matches(graph, module, inputs, f"{op_name} {dtype.value} seed {seed}")
            checked += 1
    assert checked, f"no one-node graph of {op_name} has a TensorFlow source"


def tf_graph(seed: int) -> Graph:
    """A five-node random graph of operators with a TensorFlow source, in dtypes TensorFlow runs them for."""
    options = GenOptions(nodes=5, include_ops=tuple(TF_OPS), dtypes=(DType.FLOAT32, DType.INT32, DType.BOOL),
                         max_numel=256, max_dim=6)
    for attempt in range(40):
        graph = generate(seed * 100 + attempt, options)
        if tf_unsupported(graph) is None:
            return graph
    raise AssertionError("no TensorFlow-expressible graph in 40 tries")


@pytest.mark.slow
@pytest.mark.parametrize("seed", (3, 4, 5))
def test_a_random_graph_renders_to_a_tf_model_that_matches_torch(tf: ModuleType, seed: int) -> None:
    graph = tf_graph(seed)
    module = materialize(graph, seed)
    inputs = tuple(find_valid_inputs(module, seed, budget_s=2.0).inputs.values())
    assert_matches(graph, module, inputs, f"graph of seed {seed}")
    text = render_tf_model(graph)
    assert text.startswith("def make_model(weights):\n")
    assert len(re.findall(r"  # \w+$", text, re.MULTILINE)) == len(graph.nodes)
    assert [spec.name for spec in tf_signature(graph)] == [re.sub(r"\W", "_", n) for n in graph.inputs]


def test_tf_unsupported_names_the_first_node_without_a_source() -> None:
    op = next(op for op in REGISTRY.values() if not op.has_tf_source())
    graph = next(g for dtype in (s.key_dtype for s in op.sigs)
                 if (g := single_op_graph(op, dtype, 0)) is not None)
    reason = tf_unsupported(graph)
    assert reason is not None and f"({op.name})" in reason
    with pytest.raises(ValueError, match=re.escape(f"({op.name})")):
        render_tf_model(graph)


def test_tf_unsupported_names_a_dtype_tensorflow_has_no_kernel_for() -> None:
    graph = single_op_graph(REGISTRY["fmod"], DType.INT8, 0)
    assert graph is not None
    assert tf_unsupported(graph) == f"node {graph.nodes[0].outputs[0]} (fmod) has no TensorFlow kernel for int8"


def test_at_least_170_operators_have_a_tensorflow_source() -> None:
    assert len(TF_OPS) >= 170


def test_convsmith_ops_shows_the_tensorflow_column_and_count(capsys: pytest.CaptureFixture[str]) -> None:
    from fuzzer.commands.main import main

    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[:-1]}
    assert rows["sin"][4] == "tf" and rows["copysign"][4] == "--"
    count = int(re.search(r"(\d+) with a TensorFlow source$", lines[-1]).group(1))
    assert count == len(TF_OPS) >= 170
    assert main(["ops", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert sum(row["tensorflow"] for row in table) == count
