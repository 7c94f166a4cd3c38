"""Every registered operator, through everything its class says about it: generation, its forward, its plain
PyTorch source (rendered alone, it must compute the forward's outputs bit for bit) and its discontinuities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from generators.dtypes import DType
from generators.generator import single_op_graph
from generators.ir import Graph
from generators.materialize import materialize
from generators.ops.base import OpSpec
from generators.ops.discontinuity import LABELS
from generators.registry import REGISTRY
from generators.valid_inputs import find_valid_inputs

SEEDS = (0, 1)


def first_dtypes(op: OpSpec) -> list[DType]:
    """The dtypes of the op's first input (of its output, for ops without inputs), as the probe counts them."""
    return list(dict.fromkeys(s.ins[0] if s.ins else s.out for s in op.sigs))


def source_outputs(op: OpSpec, graph: Graph, env: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Run the op's torch_source alone, with only torch in scope, on the node's inputs from `env`."""
    node = graph.nodes[0]
    args = [f"x{i}" for i in range(len(node.inputs))]
    code = f"def call({', '.join(args)}):\n    return {op.torch_source(dict(node.attrs), args)}\n"
    scope: dict[str, object] = {"torch": torch}
    exec(compile(code, f"<{op.name} source>", "exec"), scope)  # noqa: S102 - the point of the test
    result = scope["call"](*(env[n] for n in node.inputs))
    return tuple(result) if isinstance(result, tuple | list) else (result,)


def assert_bitwise_equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    assert torch.equal(actual, expected) or torch.equal(actual.isnan(), expected.isnan()) and torch.equal(
        actual.nan_to_num(0.0, 0.0, 0.0), expected.nan_to_num(0.0, 0.0, 0.0)), what


@pytest.mark.slow
@pytest.mark.parametrize("op_name", list(REGISTRY))
def test_every_op_writes_source_that_equals_its_forward(op_name: str) -> None:
    op = REGISTRY[op_name]
    checked = 0
    for dtype in first_dtypes(op):
        for seed in SEEDS:
            graph = single_op_graph(op, dtype, seed)
            if graph is None:
                continue
            module = materialize(graph, seed)  # valid inputs: integer division by zero raises in forward
            with torch.no_grad():
                env = module.run_all(*find_valid_inputs(module, seed, budget_s=1.0).inputs.values())
                got = source_outputs(op, graph, env)
            node = graph.nodes[0]
            assert len(got) == len(node.outputs), f"{op_name} {dtype.value} seed {seed}"
            for name, value in zip(node.outputs, got, strict=True):
                assert_bitwise_equal(value, env[name], f"{op_name} {dtype.value} seed {seed}: {name}")
            arrays = [env[n].float().numpy() if env[n].dtype == torch.bfloat16 else env[n].numpy()
                      for n in node.inputs]
            assert op.discontinuities(dict(node.attrs), arrays) <= LABELS
            assert_settles(op, dict(node.attrs), [env[n] for n in node.outputs], arrays)
            checked += 1
    assert checked, f"no one-node graph of {op_name} could be made"


def assert_settles(op: OpSpec, attrs: dict, outputs: list[torch.Tensor], inputs: list) -> None:
    """canonical_output keeps each output's shape and dtype and settles it once and for all (idempotent)."""
    for index, value in enumerate(outputs):
        array = value.float().numpy() if value.dtype == torch.bfloat16 else value.numpy()
        once = op.canonical_output(attrs, index, array, inputs if op.settles_output else [])
        assert (once.shape, once.dtype) == (array.shape, array.dtype), f"{op.name} output {index}"
        again = op.canonical_output(attrs, index, once, inputs if op.settles_output else [])
        assert np.array_equal(again, once, equal_nan=once.dtype.kind == "f"), f"{op.name} output {index}"


def test_an_op_settles_its_output_from_its_inputs_exactly_when_it_says_so() -> None:
    """The oracle computes an op's input values only for settles_output ops: every override of
    canonical_output must declare it."""
    for op in REGISTRY.values():
        overrides = type(op).canonical_output is not OpSpec.canonical_output
        assert overrides == op.settles_output, op.name

