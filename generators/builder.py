"""Graphs built by hand, node by node (tests, fault injection, hand-written regression cases)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from generators.dtypes import DType
from generators.ir import Graph, Node, TensorType, validate
from generators.registry import REGISTRY

F32 = DType.FLOAT32


@dataclass
class GraphBuilder:
    """Append inputs, weights and nodes; `build` closes the graph (outputs default to unread tensors)."""

    inputs: dict[str, TensorType] = field(default_factory=dict)
    weights: dict[str, TensorType] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    types: dict[str, TensorType] = field(default_factory=dict)

    def input(self, shape: tuple[int, ...], dtype: DType = F32) -> str:
        return self._tensor(self.inputs, f"in{len(self.inputs)}", shape, dtype)

    def weight(self, shape: tuple[int, ...], dtype: DType = F32) -> str:
        return self._tensor(self.weights, f"w{len(self.weights)}", shape, dtype)

    def op(self, op: str, inputs: tuple[str, ...], shape: tuple[int, ...], dtype: DType = F32, **attrs: Any) -> str:
        name = f"t{len(self.nodes)}"
        self.nodes.append(Node(op, inputs, (name,), attrs))
        self.types[name] = TensorType(shape, dtype)
        return name

    def build(self, outputs: tuple[str, ...] = ()) -> Graph:
        read = {n for node in self.nodes for n in node.inputs}
        outs = outputs or tuple(o for node in self.nodes for o in node.outputs if o not in read)
        graph = Graph(dict(self.inputs), dict(self.weights), tuple(self.nodes), outs, dict(self.types))
        validate(graph, REGISTRY)
        return graph

    def _tensor(self, table: dict[str, TensorType], name: str, shape: tuple[int, ...], dtype: DType) -> str:
        table[name] = self.types[name] = TensorType(shape, dtype)
        return name

