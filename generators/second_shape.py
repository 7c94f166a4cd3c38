"""A second shape for a graph: the same nodes, attributes and weights at other input sizes, found by z3.

A dynamic export is checked at the shape it was traced with and at a second one. The graph is lifted to z3
(generators/symbolic.py: every operator's own constraints), attributes and weight shapes stay pinned, and one input
size at a time is moved: leading (batch) dims first, then sizes several input dims share. Dims of the same size may
move with it, as one (a single dynamic dim shared by several inputs); every other input dim keeps its size. The
structure stays: a size-1 dim stays 1 and no other dim becomes 1 (a size-1 dim broadcasts, and torch.export
specializes sizes 0 and 1). The result says which input dims moved and the sizes from `low` to `high` that are all
valid for them, which is what an exporter's dynamic dim declares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import z3

from generators.edit import retype, with_leaf_shapes
from generators.ir import Graph, TensorType
from generators.ops.base import OpSpec
from generators.registry import REGISTRY
from generators.solver import fresh_z3_context
from generators.symbolic import RLIMIT, SymbolicGraph, lift

MAX_DIM = 64  # no dim grows past this (or past its traced size, when that is larger)
SPAN = 8  # sizes tried on each side of the traced one for the range of the dynamic dim
MAX_NUMEL = 4096  # nor does a tensor grow past this many elements (or its traced count, when larger)
RETYPE_SEED = 0  # the eager run that confirms z3's shapes draws its values from this seed

InputDim = tuple[str, int]  # (input name, axis)


@dataclass(frozen=True)
class SecondShape:
    """The graph at its second shape; the input dims that moved, all from the `traced` size to the `second` one (so
    they stay equal); and the sizes from `low` to `high`, both of those among them, that are all valid for them."""

    graph: Graph
    dims: tuple[InputDim, ...]
    traced: int
    second: int
    low: int
    high: int


def second_shape(graph: Graph, registry: Mapping[str, OpSpec] = REGISTRY) -> SecondShape | None:
    """The graph at a second consistent shape (see the module doc); None when every input dim is pinned by weights,
    attributes or size-1 structure. Deterministic: the same graph always gives the same answer."""
    with fresh_z3_context():
        symbolic = lift(graph, registry)
        return _Search(symbolic).run()


def at_input_shapes(graph: Graph, shapes: Mapping[str, tuple[int, ...]]) -> Graph | None:
    """The graph with its inputs at `shapes` (a saved second shape) and every other tensor typed by an eager run;
    None when an operator rejects them."""
    return retype(with_leaf_shapes(graph, shapes), RETYPE_SEED)


class _Search:
    """The solver over a lifted graph, and the candidates it moves one at a time."""

    def __init__(self, symbolic: SymbolicGraph) -> None:
        self.symbolic, self.graph = symbolic, symbolic.graph
        self.solver = z3.Solver()
        self.solver.set("rlimit", RLIMIT)
        self.solver.add(*symbolic.constraints)
        for name, ttype in self.graph.types.items():
            for dim, size in zip(symbolic.dims[name], ttype.shape, strict=True):
                self.solver.add(dim == 1 if size == 1 else z3.And(dim >= 2, dim <= max(MAX_DIM, size)))
        self.sizes = {(n, a): s for n, t in self.graph.inputs.items() for a, s in enumerate(t.shape)}

    def run(self) -> SecondShape | None:
        for candidate in self.candidates():
            peers = [d for d in self.sizes if d != candidate and self.sizes[d] == self.sizes[candidate]]
            # All dims of its size moving together first (one batch for every input), then only those that must.
            for together in (True, False):
                found = self.move(candidate, peers, together)
                if found is not None:
                    return found
        return None

    def candidates(self) -> list[InputDim]:
        """Input dims that may move, leading dims first, then the sizes most input dims share."""
        shared = {s: sum(1 for d in self.sizes if self.sizes[d] == s) for s in self.sizes.values()}
        movable = [d for d, s in self.sizes.items() if s >= 2]
        order = {d: i for i, d in enumerate(self.sizes)}
        return sorted(movable, key=lambda d: (d[1] != 0, -shared[self.sizes[d]], order[d]))

    def move(self, candidate: InputDim, peers: Sequence[InputDim], together: bool) -> SecondShape | None:
        size = self.sizes[candidate]
        var = self.var(candidate)
        fixed = [self.var(d) == s for d, s in self.sizes.items() if d != candidate and d not in peers]
        linked = [self.var(d) == var if together else z3.Or(self.var(d) == size, self.var(d) == var) for d in peers]
        for new in (size + 1, size - 1):
            if new < 2 or self.solver.check(*fixed, *linked, var == new) != z3.sat:
                continue
            model = self.solver.model()
            graph = self.confirmed(model)
            if graph is not None:
                moved = tuple(d for d in self.sizes if graph.inputs[d[0]].shape[d[1]] != self.sizes[d])
                return SecondShape(graph, moved, size, new, *self.valid_range(moved, size, new))
        return None

    def valid_range(self, moved: Sequence[InputDim], size: int, new: int) -> tuple[int, int]:
        """The run of sizes around the traced and the second one where the moved dims (all at that size, every other
        input dim at its traced size) are valid; at most SPAN beyond them on either side."""
        fixed = [self.var(d) == s for d, s in self.sizes.items() if d not in moved]

        def valid(value: int) -> bool:
            return value >= 2 and self.solver.check(*fixed, *[self.var(d) == value for d in moved]) == z3.sat

        low, high = min(size, new), max(size, new)
        while low - 1 >= min(size, new) - SPAN and valid(low - 1):
            low -= 1
        while high + 1 <= max(size, new) + SPAN and valid(high + 1):
            high += 1
        return low, high

    def confirmed(self, model: z3.ModelRef) -> Graph | None:
        """The graph at the model's shapes, when an eager run gives every tensor those shapes and none grows too
        large (a build's shape rule is the generator's word; this checks it away from the traced shape)."""
        types = {name: TensorType(tuple(_value(model, d) for d in self.symbolic.dims[name]), ttype.dtype)
                 for name, ttype in self.graph.types.items()}
        if any(t.numel > max(MAX_NUMEL, self.graph.types[n].numel) for n, t in types.items()):
            return None
        graph = Graph({n: types[n] for n in self.graph.inputs}, dict(self.graph.weights), self.graph.nodes,
                      self.graph.outputs, types, self.graph.ranges)
        eager = retype(graph, RETYPE_SEED)
        return graph if eager is not None and dict(eager.types) == types else None

    def var(self, dim: InputDim) -> z3.ArithRef:
        return self.symbolic.dims[dim[0]][dim[1]]


def _value(model: z3.ModelRef, dim: z3.ArithRef) -> int:
    return model.eval(dim, model_completion=True).as_long()
