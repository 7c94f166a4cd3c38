"""The reducer's passes: each a small function that proposes smaller graphs to `Shrinker.consider`.

A pass never decides anything itself: it builds candidates and hands each to the one acceptance point
(`Shrinker.consider`), which keeps a candidate only when it is strictly smaller and still the same bug.
Candidates whose shapes change are re-typed by running the graph eagerly (`retype`): an op the new shapes
or attributes make invalid raises there, and the candidate is dropped before any converter sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from fuzzer.reduce.size import attr_cost, range_cost, value_range
from generators.edit import bypass, cut, leaves, prune, with_leaf_shapes
from generators.ir import Graph


class Shrinker(Protocol):
    """What a pass sees of the shrinker: the current graph and the one acceptance point."""

    current: Graph
    suspects: tuple[str, ...]  # graph outputs the original verdict points at (a diverging one, a culprit's cone)

    def consider(self, candidate: Graph | None) -> bool:
        """Keep `candidate` when it is strictly smaller and still the same bug."""

    def consider_retyped(self, candidate: Graph) -> bool:
        """`consider`, after re-typing a candidate whose shapes or attributes changed."""


Pass = Callable[[Shrinker], None]


# ---- the passes ------------------------------------------------------------------------------------------

def remove_dead(s: Shrinker) -> None:
    """Dead nodes, unused inputs and weights go."""
    s.consider(prune(s.current))


def drop_outputs(s: Shrinker) -> None:
    """Each suspect output kept alone, then half the outputs kept while that keeps the bug, then each output dropped
    in turn, latest first (the rest of the graph prunes). Each check on a smaller cone spares checks on the whole."""
    for out in s.suspects:
        if len(s.current.outputs) > 1 and out in s.current.outputs and s.consider(_keep(s.current, (out,))):
            break
    while len(outputs := s.current.outputs) > 2:
        half = len(outputs) // 2
        if not (s.consider(_keep(s.current, outputs[half:])) or s.consider(_keep(s.current, outputs[:half]))):
            break
    for out in reversed(s.current.outputs):
        if len(s.current.outputs) > 1 and out in s.current.outputs:
            g = s.current
            s.consider(_keep(g, tuple(o for o in g.outputs if o != out)))


def _keep(graph: Graph, outputs: tuple[str, ...]) -> Graph:
    return prune(replace(graph, outputs=outputs))


def cut_nodes(s: Shrinker) -> None:
    """Remove one node, its readers fed from a fresh input of the same type; last node first."""
    i = len(s.current.nodes) - 1
    while i >= 0:
        if i < len(s.current.nodes):
            candidate = cut(s.current, i)
            if candidate is not None:
                s.consider(candidate)
        i -= 1


def bypass_nodes(s: Shrinker) -> None:
    """Remove one node whose output has the type of one of its inputs, reading that input instead."""
    i = len(s.current.nodes) - 1
    while i >= 0:
        if i < len(s.current.nodes):
            for source in dict.fromkeys(s.current.nodes[i].inputs):
                if i < len(s.current.nodes) and source in s.current.nodes[i].inputs:
                    candidate = bypass(s.current, i, source)
                    if candidate is not None and s.consider(candidate):
                        break
        i -= 1


def _shape_candidates(graph: Graph) -> Iterator[dict[str, tuple[int, ...]]]:
    names = leaves(graph)
    yield {n: (1,) * graph.types[n].rank for n in names}
    values = sorted({d for n in names for d in graph.types[n].shape if d > 1}, reverse=True)
    for v in values:  # one size everywhere it occurs: keeps dims that must agree in agreement
        for smaller in dict.fromkeys((1, 2, v // 2, v - 1)):
            if 1 <= smaller < v:
                yield {n: tuple(smaller if d == v else d for d in graph.types[n].shape) for n in names}
    for n in names:
        for axis, d in enumerate(graph.types[n].shape):
            for smaller in dict.fromkeys((1, d // 2, d - 1)):
                if 1 <= smaller < d:
                    shape = list(graph.types[n].shape)
                    shape[axis] = smaller
                    yield {n: tuple(shape)}


def shrink_dims(s: Shrinker) -> None:
    """Smaller input and weight dims (all to 1, one size everywhere it occurs, one dim), re-typed eagerly."""
    for shapes in _shape_candidates(s.current):
        if all(n in s.current.types and s.current.types[n].rank == len(v) for n, v in shapes.items()):
            s.consider_retyped(with_leaf_shapes(s.current, shapes))


def lower_ranks(s: Shrinker) -> None:
    """Drop one dim of an input or weight (size-1 dims first, then the leading one), re-typed eagerly."""
    for n in leaves(s.current):
        if n not in s.current.types:
            continue
        shape = s.current.types[n].shape
        axes = [a for a, d in enumerate(shape) if d == 1] + ([0] if shape and shape[0] != 1 else [])
        for axis in axes:
            if n in s.current.types and s.current.types[n].shape == shape:
                s.consider_retyped(with_leaf_shapes(s.current, {n: shape[:axis] + shape[axis + 1:]}))


def _simpler_values(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [False] if value else []
    if isinstance(value, int):
        return [v for v in dict.fromkeys((0, 1, -1, value // 2, value - 1 if value > 0 else value + 1))
                if abs(v) < abs(value)]
    if isinstance(value, float):
        return [v for v in dict.fromkeys((0.0, 1.0, float(round(value)), value / 2)) if attr_cost(v) < attr_cost(value)]
    if isinstance(value, tuple):
        out: list[Any] = []
        for i, item in enumerate(value):
            out += [value[:i] + (v,) + value[i + 1:] for v in _simpler_values(item)[:2]]
        return out
    return []


def simplify_attrs(s: Shrinker) -> None:
    """Each attribute toward a default: None, False, 0, 1, halved; tuples element by element; re-typed eagerly."""
    for i in range(len(s.current.nodes)):
        for key in sorted(s.current.nodes[i].attrs) if i < len(s.current.nodes) else ():
            value = s.current.nodes[i].attrs.get(key)
            for simpler in ([None] if value is not None and not isinstance(value, str | bool) else []) + \
                    _simpler_values(value):
                node = s.current.nodes[i]
                nodes = list(s.current.nodes)
                nodes[i] = replace(node, attrs={**node.attrs, key: simpler})
                if s.consider_retyped(replace(s.current, nodes=tuple(nodes))):
                    break


VALUE_RANGES = ((0, 0), (1, 1), (0, 1), (-1, 1), (0, 2), (-2, 2))


def simplify_values(s: Shrinker) -> None:
    """Input and weight values drawn from simpler ranges: zeros, ones, then small integers or small floats."""
    for n in leaves(s.current):
        if n not in s.current.types:
            continue
        lo, hi = value_range(s.current, n)
        for candidate in VALUE_RANGES + ((lo, lo),):
            if lo <= candidate[0] <= candidate[1] <= hi and range_cost(candidate) < range_cost((lo, hi)):
                g = s.current
                if s.consider(replace(g, ranges={**g.ranges, n: candidate})):
                    break


# The passes that take nodes away: a case reduced by these alone names its culprit and is as small in nodes. The
# rest polish it (dims, ranks, attributes, values) at about as many checks again.
SHAPE_PASSES: tuple[Pass, ...] = (
    remove_dead,
    drop_outputs,
    cut_nodes,
    bypass_nodes,
)
PASSES: tuple[Pass, ...] = (
    *SHAPE_PASSES,
    shrink_dims,
    lower_ranks,
    simplify_attrs,
    simplify_values,
)
