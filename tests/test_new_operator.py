"""Adding an operator is one class in one module and nothing else: a throwaway operator, written to a temporary
module, is generated, materialized (eager and float64), rendered as plain PyTorch for repro.py, and labelled
by the oracle's discontinuity lookup, with no table anywhere else touched."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from fuzzer.cases.repro import render_module
from generators.generator import GenOptions, generate
from generators.ir import validate
from generators.materialize import float64_twin, materialize, random_inputs, widen_inputs
from generators.registry import OpRegistry, family_modules
from oracles.discontinuity import labels_for

THROWAWAY = '''
"""A family of one operator that exists only for this test."""

import torch

from generators.dtypes import DType
from generators.ops.base import ANY_RANK, Build, OpSpec, SymTensor, same_sigs
from generators.ops.discontinuity import to_integer


class DoubledTrunc(OpSpec):
    """trunc(x) * 2: jumps wherever x crosses an integer."""

    name = "doubled_trunc"
    family = "throwaway"
    sigs = same_sigs((DType.FLOAT32, DType.FLOAT64))
    ranks = (ANY_RANK,)
    emits_zeros = True
    discontinuity = staticmethod(to_integer)

    def build(self, ctx, x):
        return Build([SymTensor(x.shape, x.dtype)])

    def forward(self, attrs, x):
        return torch.trunc(x) * 2

    def torch_source(self, attrs, args):
        return f"torch.trunc({args[0]}) * 2"


OPS = [DoubledTrunc]
'''


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OpRegistry:
    (tmp_path / "throwaway_family.py").write_text(textwrap.dedent(THROWAWAY))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("throwaway_family")
    return OpRegistry.from_modules([*family_modules(), module])


def test_a_new_operator_class_is_generated_run_rendered_and_labelled(registry: OpRegistry) -> None:
    assert "doubled_trunc" in registry and "throwaway" in registry.families
    graph = generate(3, GenOptions(nodes=3, include_ops=("doubled_trunc", "add")), registry)
    validate(graph, registry)
    assert "doubled_trunc" in graph.ops()
    module = materialize(graph, 3, registry=registry)
    inputs = tuple(random_inputs(graph, 3).values())
    with torch.no_grad():
        eager = module(*inputs)
        reference = float64_twin(module)(*widen_inputs(inputs))
    assert [r.dtype for r in reference] == [torch.float64 if e.is_floating_point() else e.dtype for e in eager]

    scope: dict = {"torch": torch, "_register": lambda m, n, v: m.register_buffer(n, v),
                   "load_tensor": lambda rel: getattr(module, rel.removeprefix("weights/").removesuffix(".pb"))}
    exec(render_module(graph, registry), scope)  # noqa: S102 - the rendered repro module
    with torch.no_grad():
        rendered = scope["Repro"]()(*inputs)
    assert all(torch.equal(a, b) for a, b in zip(rendered, eager, strict=True))

    op = registry["doubled_trunc"]
    assert labels_for(op, [np.array([1.0, 2.5], np.float32)]) == {"rounding_tie"}
    assert labels_for(op, [np.array([1.25, 2.5], np.float32)]) == set()


def test_the_standard_catalogue_does_not_see_the_throwaway(registry: OpRegistry) -> None:
    from generators.registry import REGISTRY

    assert "doubled_trunc" not in REGISTRY and len(registry) == len(REGISTRY) + 1
