"""The size order of the reducer: a candidate graph must be strictly smaller to be accepted.

Compared lexicographically, in turn: operators, graph outputs, inputs plus weights, elements over all tensors,
ranks over all tensors, attribute magnitude, and input-value magnitude.
"""

from __future__ import annotations

from typing import Any

from generators.dtypes import DType
from generators.ir import Graph
from generators.materialize import default_range


def graph_size(graph: Graph) -> tuple[float, ...]:
    """The size order, compared lexicographically."""
    leaves = list(graph.inputs) + list(graph.weights)
    return (
        len(graph.nodes),
        len(graph.outputs),
        len(leaves),
        sum(t.numel for t in graph.types.values()),
        sum(t.rank for t in graph.types.values()),
        sum(attr_cost(v) for node in graph.nodes for v in node.attrs.values()),
        sum(range_cost(value_range(graph, n)) for n in leaves),
    )


def attr_cost(value: Any) -> float:
    if value is None or isinstance(value, str):
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return abs(value) + (0 if float(value).is_integer() else 1)
    if isinstance(value, tuple):
        return len(value) + sum(attr_cost(v) for v in value)
    return 0


def value_range(graph: Graph, name: str) -> tuple[float, float]:
    ttype = graph.types[name]
    lo, hi = graph.ranges.get(name, default_range(ttype.dtype))
    if ttype.dtype is DType.BOOL:
        return max(lo, 0), min(hi, 1)
    return lo, hi


def range_cost(bounds: tuple[float, float]) -> float:
    return abs(bounds[0]) + abs(bounds[1])
