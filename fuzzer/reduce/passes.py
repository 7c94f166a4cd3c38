"""The reducer's passes: each a small function that proposes smaller graphs to `Shrinker.consider`.

A pass never decides anything itself: it builds candidates and hands each to the one acceptance point
(`Shrinker.consider`), which keeps a candidate only when it is strictly smaller and still the same bug.
Candidates whose shapes change are re-typed by running the graph eagerly (`retype`): an op the new shapes
or attributes make invalid raises there, and the candidate is dropped before any converter sees it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from generators.dtypes import DType
from generators.ir import Graph, Node, TensorType
from generators.materialize import default_range, materialize, random_inputs

if TYPE_CHECKING:
    from fuzzer.reduce.shrinker import Shrinker

Pass = Callable[["Shrinker"], None]


# ---- graph surgery ---------------------------------------------------------------------------------------

def prune(graph: Graph) -> Graph:
    """Drop nodes no output depends on, and inputs, weights, types and ranges nothing reads."""
    needed = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if needed & set(node.outputs):
            kept.append(node)
            needed |= set(node.inputs)
    nodes = tuple(reversed(kept))
    inputs = {n: t for n, t in graph.inputs.items() if n in needed}
    weights = {n: t for n, t in graph.weights.items() if n in needed}
    defined = set(inputs) | set(weights) | {o for node in nodes for o in node.outputs}
    return Graph(inputs, weights, nodes, graph.outputs, {n: t for n, t in graph.types.items() if n in defined},
                 {n: r for n, r in graph.ranges.items() if n in defined})


def _fresh_name(graph: Graph, taken: set[str]) -> str:
    i = 0
    while f"r{i}" in graph.types or f"r{i}" in taken:
        i += 1
    return f"r{i}"


def _rename_inputs(node: Node, mapping: Mapping[str, str]) -> Node:
    return replace(node, inputs=tuple(mapping.get(n, n) for n in node.inputs))


def cut(graph: Graph, index: int) -> Graph | None:
    """Remove node `index`: its readers read fresh graph inputs of the same types; where its outputs were graph
    outputs, the node's own computed inputs become outputs instead (so the upstream part stays observable)."""
    node = graph.nodes[index]
    later = graph.nodes[index + 1:]
    read = {n for other in later for n in other.inputs}
    mapping: dict[str, str] = {}
    new_inputs = dict(graph.inputs)
    types = dict(graph.types)
    for out in node.outputs:
        if out in read:
            mapping[out] = _fresh_name(graph, set(mapping.values()))
            new_inputs[mapping[out]] = types[mapping[out]] = graph.types[out]
    produced = {o for other in graph.nodes[:index] for o in other.outputs}
    outputs: list[str] = []
    for out in graph.outputs:
        if out not in node.outputs:
            outputs.append(out)
            continue
        outputs += [n for n in node.inputs if n in produced and n not in outputs]
    outputs = list(dict.fromkeys(mapping.get(o, o) for o in outputs))
    if not outputs:
        return None
    nodes = graph.nodes[:index] + tuple(_rename_inputs(n, mapping) for n in later)
    for out in node.outputs:
        types.pop(out, None)
    return prune(Graph(new_inputs, graph.weights, nodes, tuple(outputs), types, graph.ranges))


def bypass(graph: Graph, index: int, source: str) -> Graph | None:
    """Remove node `index`, feeding its (single-output) readers and outputs from `source`, one of its inputs."""
    node = graph.nodes[index]
    if len(node.outputs) != 1 or graph.types[source] != graph.types[node.outputs[0]]:
        return None
    mapping = {node.outputs[0]: source}
    nodes = graph.nodes[:index] + tuple(_rename_inputs(n, mapping) for n in graph.nodes[index + 1:])
    outputs = tuple(dict.fromkeys(mapping.get(o, o) for o in graph.outputs))
    if any(o in graph.inputs or o in graph.weights for o in outputs):
        return None  # a graph input as an output tests nothing
    types = {n: t for n, t in graph.types.items() if n != node.outputs[0]}
    return prune(Graph(graph.inputs, graph.weights, nodes, outputs, types, graph.ranges))


def retype(graph: Graph, seed: int) -> Graph | None:
    """The graph with every tensor's type taken from an eager run; None when an op rejects the new shapes or
    attributes, a dtype changes, or a tensor becomes empty."""
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            module = materialize(graph, seed)
            env = module.run_all(*random_inputs(graph, seed).values())
    except Exception:  # any error of the eager model means the candidate is not a valid graph
        return None
    types: dict[str, TensorType] = {}
    for name, old in graph.types.items():
        value = env.get(name)
        if not isinstance(value, torch.Tensor) or value.dtype != old.dtype.torch or value.numel() == 0:
            return None
        types[name] = TensorType(tuple(value.shape), old.dtype)
    return Graph({n: types[n] for n in graph.inputs}, {n: types[n] for n in graph.weights}, graph.nodes,
                 graph.outputs, types, graph.ranges)


def with_leaf_shapes(graph: Graph, shapes: Mapping[str, tuple[int, ...]]) -> Graph:
    """The graph with some input/weight shapes replaced (other types are stale until `retype`)."""
    types = dict(graph.types)
    for name, shape in shapes.items():
        types[name] = TensorType(tuple(shape), graph.types[name].dtype)
    return Graph({n: types[n] for n in graph.inputs}, {n: types[n] for n in graph.weights}, graph.nodes,
                 graph.outputs, types, graph.ranges)


def leaves(graph: Graph) -> list[str]:
    return list(graph.inputs) + list(graph.weights)


# ---- the passes ------------------------------------------------------------------------------------------

def remove_dead(s: Shrinker) -> None:
    """Dead nodes, unused inputs and weights go."""
    s.consider(prune(s.current))


def drop_outputs(s: Shrinker) -> None:
    """Each graph output in turn, latest first (the rest of the graph then prunes)."""
    for out in reversed(s.current.outputs):
        if len(s.current.outputs) > 1 and out in s.current.outputs:
            g = s.current
            s.consider(prune(replace(g, outputs=tuple(o for o in g.outputs if o != out))))


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


PASSES: tuple[Pass, ...] = (
    remove_dead,
    drop_outputs,
    cut_nodes,
    bypass_nodes,
    shrink_dims,
    lower_ranks,
    simplify_attrs,
    simplify_values,
)


# ---- costs used by the size order ------------------------------------------------------------------------

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
