"""Every registered operator: a graph containing it is generated, materialized and run; types match the IR."""

from __future__ import annotations

import pytest

from generators.dtypes import DType
from generators.generator import GenOptions, generate
from generators.materialize import materialize
from generators.registry import REGISTRY
from generators.valid_inputs import find_valid_inputs

SEEDS_PER_OP = 12


def run_op_graph(op_name: str, seed: int):
    graph = generate(seed, GenOptions(nodes=3, include_ops=(op_name,)))
    module = materialize(graph, seed)
    found = find_valid_inputs(module, seed)
    env = module.run_all(*found.inputs.values())
    return graph, env


@pytest.mark.slow
@pytest.mark.parametrize("op_name", list(REGISTRY))
def test_every_op_generates_and_runs(op_name: str) -> None:
    seen_dtypes: set[DType] = set()
    for seed in range(SEEDS_PER_OP):
        graph, env = run_op_graph(op_name, seed)
        assert op_name in graph.ops()
        for name, ttype in graph.types.items():
            assert tuple(env[name].shape) == ttype.shape, f"{name} of seed {seed}"
            assert DType.from_torch(env[name].dtype) is ttype.dtype, f"{name} of seed {seed}"
        seen_dtypes |= {graph.types[n.outputs[0]].dtype for n in graph.nodes if n.op == op_name}
        features = REGISTRY.features(graph)  # what the campaign's novelty reads of a graph (OpSpec.features)
        assert all(isinstance(f, str) and f.count(":") >= 1 for f in features), (op_name, features)
    assert seen_dtypes, op_name


def test_catalogue_has_at_least_100_ops() -> None:
    assert len(REGISTRY) >= 100
