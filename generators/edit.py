"""Graph surgery on the concrete IR: prune, cut or bypass a node, take a prefix or a node alone, change leaf shapes,
retype.

Each function returns a new Graph (the IR is immutable); the reducer and the locator build candidates with them.
A candidate whose shapes changed is re-typed by running it eagerly (`retype`), which also drops candidates an
operator rejects.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import replace

import torch

from generators.ir import Graph, Node, TensorType
from generators.materialize import materialize, random_inputs


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


def prefix(graph: Graph, k: int) -> Graph:
    """The first k nodes as a graph of their own: what they read are its inputs, what no later node of the
    prefix reads are its outputs."""
    nodes = graph.nodes[:k]
    read = {n for node in nodes for n in node.inputs}
    outputs = tuple(o for node in nodes for o in node.outputs if o not in read)
    inputs = {n: t for n, t in graph.inputs.items() if n in read}
    weights = {n: t for n, t in graph.weights.items() if n in read}
    defined = set(inputs) | set(weights) | {o for node in nodes for o in node.outputs}
    return Graph(inputs, weights, nodes, outputs, {n: t for n, t in graph.types.items() if n in defined},
                 {n: r for n, r in graph.ranges.items() if n in defined})


def alone(graph: Graph, index: int) -> Graph | None:
    """Node `index` as a graph of its own: what other nodes made becomes graph inputs, weights stay weights, its
    outputs are the outputs; None when it reads no graph input or node output (an exporter folds it to a constant)."""
    node = graph.nodes[index]
    read = tuple(dict.fromkeys(node.inputs))
    inputs = {n: graph.types[n] for n in read if n not in graph.weights}
    if not inputs:
        return None
    weights = {n: graph.types[n] for n in read if n in graph.weights}
    types = {**inputs, **weights, **{o: graph.types[o] for o in node.outputs}}
    return Graph(inputs, weights, (node,), tuple(node.outputs), types,
                 {n: r for n, r in graph.ranges.items() if n in inputs or n in weights})
