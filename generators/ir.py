"""The graph IR: concrete tensor types, nodes and graphs, with versioned JSON and a validator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from generators.dtypes import DType

SCHEMA_VERSION = 1

AttrValue = int | float | bool | str | tuple[int, ...] | None


class GraphError(ValueError):
    """A graph that breaks an IR rule; the message names the offending part."""


@dataclass(frozen=True)
class TensorType:
    """A concrete shape and element type."""

    shape: tuple[int, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorType:
        return cls(tuple(map(int, data["shape"])), DType(data["dtype"]))


@dataclass(frozen=True)
class Node:
    """One operator application: reads `inputs`, writes `outputs` (tensor names)."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, AttrValue] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(self.attrs.items())}
        return {"op": self.op, "inputs": list(self.inputs), "outputs": list(self.outputs), "attrs": attrs}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Node:
        attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.get("attrs", {}).items()}
        return cls(data["op"], tuple(data["inputs"]), tuple(data["outputs"]), attrs)


@dataclass(frozen=True)
class Graph:
    """Inputs and weights (name -> type), nodes in topological order, output names, and every tensor's type."""

    inputs: Mapping[str, TensorType]
    weights: Mapping[str, TensorType]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    types: Mapping[str, TensorType]
    # Value range [lo, hi] a tensor's values are drawn from, where an op needs one (e.g. gather indices).
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "inputs": {k: v.to_json() for k, v in self.inputs.items()},
            "weights": {k: v.to_json() for k, v in self.weights.items()},
            "nodes": [n.to_json() for n in self.nodes],
            "outputs": list(self.outputs),
            "types": {k: v.to_json() for k, v in self.types.items()},
            "ranges": {k: list(v) for k, v in self.ranges.items()},
        }

    def dumps(self) -> str:
        """Canonical JSON text, one entry a line: the same graph always gives the same bytes."""
        parts = []
        for key, value in self.to_json().items():
            if isinstance(value, dict) and value:
                rows = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
                parts.append(f"  {json.dumps(key)}: {{\n{rows}\n  }}")
            elif isinstance(value, list) and value and key == "nodes":
                rows = ",\n".join(f"    {json.dumps(v)}" for v in value)
                parts.append(f"  {json.dumps(key)}: [\n{rows}\n  ]")
            else:
                parts.append(f"  {json.dumps(key)}: {json.dumps(value)}")
        return "{\n" + ",\n".join(parts) + "\n}\n"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Graph:
        if not isinstance(data, Mapping):
            raise GraphError("graph JSON must be an object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise GraphError(f"unknown graph schema version {version!r} (this convsmith reads {SCHEMA_VERSION})")
        parsed: dict[tuple[Any, ...], TensorType] = {}  # a graph's tensors share a few types: each is parsed once

        def typed(value: Mapping[str, Any]) -> TensorType:
            key = (value["dtype"], *value["shape"])
            found = parsed.get(key)
            if found is None:
                found = parsed[key] = TensorType.from_json(value)
            return found

        try:
            return cls(
                inputs={k: typed(v) for k, v in data["inputs"].items()},
                weights={k: typed(v) for k, v in data["weights"].items()},
                nodes=tuple(Node.from_json(n) for n in data["nodes"]),
                outputs=tuple(data["outputs"]),
                types={k: typed(v) for k, v in data["types"].items()},
                ranges={k: (v[0], v[1]) for k, v in data.get("ranges", {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GraphError(f"malformed graph JSON: {type(exc).__name__}: {exc}") from None

    @classmethod
    def loads(cls, text: str) -> Graph:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GraphError(f"graph is not valid JSON: {exc}") from None
        return cls.from_json(data)

    def producer(self) -> dict[str, Node]:
        """Map each node output name to the node that writes it."""
        return {out: node for node in self.nodes for out in node.outputs}

    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]


def validate(graph: Graph, known_ops: Mapping[str, object] | None = None) -> None:
    """Raise GraphError naming the first broken rule: names, topology, types, outputs, known operators."""
    defined: set[str] = set()
    for name in list(graph.inputs) + list(graph.weights):
        if name in defined:
            raise GraphError(f"tensor {name!r} is defined twice")
        defined.add(name)
    for kind, table in (("input", graph.inputs), ("weight", graph.weights)):
        for name, ttype in table.items():
            if graph.types.get(name) != ttype:
                raise GraphError(f"{kind} {name!r} has type {ttype} but types[] says {graph.types.get(name)}")
    for i, node in enumerate(graph.nodes):
        if known_ops is not None and node.op not in known_ops:
            raise GraphError(f"node {i} uses unknown operator {node.op!r}")
        for name in node.inputs:
            if name not in defined:
                raise GraphError(f"node {i} ({node.op}) reads {name!r} before it is defined")
        if not node.outputs:
            raise GraphError(f"node {i} ({node.op}) has no outputs")
        for name in node.outputs:
            if name in defined:
                raise GraphError(f"node {i} ({node.op}) redefines tensor {name!r}")
            if name not in graph.types:
                raise GraphError(f"node {i} ({node.op}) output {name!r} has no type")
            defined.add(name)
    if not graph.outputs:
        raise GraphError("graph has no outputs")
    for name in graph.outputs:
        if name not in defined:
            raise GraphError(f"graph output {name!r} is not defined")
    for name, ttype in graph.types.items():
        if name not in defined:
            raise GraphError(f"types[] names {name!r}, which no input, weight or node defines")
        if any(d < 0 for d in ttype.shape):
            raise GraphError(f"tensor {name!r} has a negative dimension in {ttype.shape}")
    for name, (lo, hi) in graph.ranges.items():
        if name not in graph.types or lo > hi:
            raise GraphError(f"value range {name!r}: [{lo}, {hi}] names no tensor or is empty")
