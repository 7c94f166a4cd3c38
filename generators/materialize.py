"""A graph becomes a torch.nn.Module (weights drawn from a seed), a float64 twin, and named intermediates."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from generators.dtypes import DType
from generators.ir import Graph, TensorType
from generators.ops.base import OpSpec
from generators.registry import REGISTRY
from generators.values import ValueStrategy, large_range, with_specials

FLOAT64_ATTR_KEYS = ("to", "dtype")  # attrs naming a float dtype are widened in the float64 twin


def default_range(dtype: DType) -> tuple[float, float]:
    """Where random values of a dtype are drawn from when the graph names no range (inclusive)."""
    if dtype.is_float:
        return (-2.0, 2.0)
    if dtype is DType.UINT8:
        return (0, 15)
    if dtype is DType.BOOL:
        return (0, 1)
    return (-8, 8)


def random_tensor(
    ttype: TensorType, gen: torch.Generator, value_range: tuple[float, float] | None = None
) -> torch.Tensor:
    """Values of `ttype` drawn uniformly from the range (integers inclusive), from `gen` only."""
    lo, hi = value_range if value_range is not None else default_range(ttype.dtype)
    if ttype.dtype.is_float:
        x = torch.rand(ttype.shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
        return x.to(ttype.dtype.torch)
    x = torch.randint(int(lo), int(hi) + 1, ttype.shape, generator=gen, dtype=torch.int64)
    return x.to(ttype.dtype.torch)


def random_weights(graph: Graph, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {n: random_tensor(t, gen, graph.ranges.get(n)) for n, t in graph.weights.items()}


def random_inputs(graph: Graph, seed: int, values: ValueStrategy = ValueStrategy.UNIFORM) -> dict[str, torch.Tensor]:
    """The graph's inputs drawn from `seed` under a value strategy (generators/values.py)."""
    gen = torch.Generator().manual_seed(seed + 1)
    return {n: input_tensor(t, gen, graph.ranges.get(n), values) for n, t in graph.inputs.items()}


def input_tensor(ttype: TensorType, gen: torch.Generator, value_range: tuple[float, float] | None,
                 values: ValueStrategy) -> torch.Tensor:
    """One input under a value strategy; UNIFORM draws exactly what random_tensor draws."""
    lo, hi = value_range if value_range is not None else default_range(ttype.dtype)
    if values is ValueStrategy.LARGE:
        return random_tensor(ttype, gen, large_range(ttype.dtype, lo, hi, value_range is not None))
    drawn = random_tensor(ttype, gen, (lo, hi))
    return with_specials(drawn, ttype, gen, value_range) if values is ValueStrategy.SPECIAL else drawn


def _widened(dtype: DType) -> DType:
    return DType.FLOAT64 if dtype.is_float else dtype


class GraphModule(torch.nn.Module):
    """Runs the graph's nodes in order; float weights are Parameters, the others buffers."""

    def __init__(self, graph: Graph, weights: Mapping[str, torch.Tensor], widen: bool = False,
                 registry: Mapping[str, OpSpec] = REGISTRY, float32_attrs: bool = False) -> None:
        super().__init__()
        self.graph = graph
        self.widen = widen
        self.registry = registry
        self._ops = [registry[n.op] for n in graph.nodes]
        self._attrs = [self._node_attrs(op.float32_rounded(n.attrs) if float32_attrs else n.attrs)
                       for n, op in zip(graph.nodes, self._ops, strict=True)]
        for name, value in weights.items():
            if widen and value.is_floating_point():
                value = value.to(torch.float64)
            if value.is_floating_point():
                self.register_parameter(name, torch.nn.Parameter(value.clone(), requires_grad=False))
            else:
                self.register_buffer(name, value.clone())

    @property
    def ops(self) -> tuple[OpSpec, ...]:
        """The operator spec of each node, in graph order."""
        return tuple(self._ops)

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Replace weight values in place (same names, shapes and dtypes)."""
        with torch.no_grad():
            for name, value in weights.items():
                getattr(self, name).copy_(value)

    def _node_attrs(self, attrs: Mapping) -> dict:
        if not self.widen:
            return dict(attrs)
        out = dict(attrs)
        for key in FLOAT64_ATTR_KEYS:
            if key in out and isinstance(out[key], str) and DType(out[key]).is_float:
                out[key] = _widened(DType(out[key])).value
        return out

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env = self._run(inputs)
        return tuple(env[n] for n in self.graph.outputs)

    def run_all(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every tensor of the graph by IR name: inputs, weights and node outputs."""
        return self._run(inputs)

    def _run(self, inputs: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
        env: dict[str, torch.Tensor] = dict(zip(self.graph.inputs, inputs))
        for name in self.graph.weights:
            env[name] = getattr(self, name)
        for node, op, attrs in zip(self.graph.nodes, self._ops, self._attrs):
            result = op.forward(attrs, *(env[n] for n in node.inputs))
            outs = result if isinstance(result, (tuple, list)) else (result,)
            for name, value in zip(node.outputs, outs):
                env[name] = value
        return env


def materialize(graph: Graph, seed: int, widen: bool = False,
                registry: Mapping[str, OpSpec] = REGISTRY) -> GraphModule:
    """The graph as a module of `registry`'s operators with weights drawn from `seed`; `widen` gives the float64
    twin."""
    return GraphModule(graph, random_weights(graph, seed), widen=widen, registry=registry)


def float64_twin(module: GraphModule, float32_attrs: bool = False) -> GraphModule:
    """The same graph and weights with every float tensor widened to float64 (the reference run); `float32_attrs`:
    with the attributes formats store as float32 rounded so (OpSpec.float32_attrs)."""
    weights = {n: getattr(module, n).detach() for n in module.graph.weights}
    return GraphModule(module.graph, weights, widen=True, registry=module.registry, float32_attrs=float32_attrs)


def widen_inputs(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(x.to(torch.float64) if x.is_floating_point() else x for x in inputs)
