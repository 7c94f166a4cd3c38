"""An ONNX operator pattern: the nodes of a reduced case's ONNX model, each with the attributes and input dtypes
that select its behaviour, and the edges between them; and whether a model contains it.

What must match, exactly: the operator (domain and op type); every attribute that selects a behaviour, an int or a
string (a mode, an axis, a Cast's target type, keepdims, transA); the dtype of each input, where the pattern knows
it; and every edge (the same output of one matched node feeds the same input of another). What need not: sizes and
thresholds (list and float attributes: kernel shapes, pads, permutations, epsilons), tensor values, names.
Constant and Identity nodes are left out of a pattern: exporters write a constant as a node or as an initializer,
and an Identity as they please.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import onnx

IGNORED_OPS = frozenset({("", "Constant"), ("", "Identity")})


@dataclass(frozen=True)
class NodeKey:
    """What a node must be to match: operator, behaviour attributes and input dtypes (0: any)."""

    domain: str
    op_type: str
    attributes: tuple[tuple[str, int | str], ...]
    input_dtypes: tuple[int, ...]

    def matches(self, other: NodeKey) -> bool:
        """Whether a model's node `other` is this pattern node: the same operator and attributes, each input dtype
        the pattern knows the same (one the model does not know never matches a known one)."""
        if (self.domain, self.op_type, self.attributes) != (other.domain, other.op_type, other.attributes):
            return False
        if len(self.input_dtypes) > len(other.input_dtypes):
            return False
        return all(want == 0 or want == got for want, got in zip(self.input_dtypes, other.input_dtypes))

    def describe(self) -> str:
        """`Erf(float32)`, `Cast{to=10}(float32)`: how a report names it."""
        attrs = "{" + ", ".join(f"{k}={v}" for k, v in self.attributes) + "}" if self.attributes else ""
        dtypes = ", ".join(onnx.helper.tensor_dtype_to_np_dtype(d).name if d else "?" for d in self.input_dtypes)
        op = f"{self.domain}.{self.op_type}" if self.domain not in ("", "ai.onnx") else self.op_type
        return f"{op}{attrs}({dtypes})"


@dataclass(frozen=True)
class Edge:
    """Output `src_output` of pattern node `src` feeds input `dst_input` of pattern node `dst`."""

    src: int
    src_output: int
    dst: int
    dst_input: int


@dataclass(frozen=True)
class Pattern:
    """Nodes, the edges between them, and the inputs (node, slot) that read one value from outside the pattern
    (a graph input or a value of a node left out, never a constant): a match reads one value there too."""

    nodes: tuple[NodeKey, ...]
    edges: tuple[Edge, ...]
    shared: tuple[tuple[tuple[int, int], ...], ...] = ()

    def describe(self) -> str:
        """The nodes in order, as a report names them."""
        return ", ".join(n.describe() for n in self.nodes)


@dataclass(frozen=True)
class IndexedModel:
    """A model's nodes as keys, who produces each value, and its nodes by operator: what matching reads."""

    keys: tuple[NodeKey, ...]
    inputs: tuple[tuple[str, ...], ...]
    outputs: tuple[tuple[str, ...], ...]
    by_op: Mapping[tuple[str, str], tuple[int, ...]]
    constants: frozenset[str] = frozenset()  # initializers and Constant nodes' outputs


def value_dtypes(model: onnx.ModelProto) -> dict[str, int]:
    """Every value's element type the model declares or shape inference finds (inputs, initializers, the rest)."""
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError, ValueError):
        pass  # what the model declares is still known
    graph = model.graph
    dtypes = {i.name: i.data_type for i in graph.initializer}
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            dtypes[info.name] = info.type.tensor_type.elem_type
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    dtypes[node.output[0]] = attr.t.data_type
    return dtypes


def node_key(node: onnx.NodeProto, dtypes: Mapping[str, int]) -> NodeKey:
    """The node's operator, its int and string attributes, and its inputs' dtypes (0 where unknown or absent)."""
    attrs = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.INT:
            attrs.append((attr.name, int(attr.i)))
        elif attr.type == onnx.AttributeProto.STRING:
            attrs.append((attr.name, attr.s.decode(errors="replace")))
    domain = "" if node.domain == "ai.onnx" else node.domain
    return NodeKey(domain, node.op_type, tuple(sorted(attrs)), tuple(dtypes.get(x, 0) if x else 0 for x in node.input))


def index_model(model: onnx.ModelProto) -> IndexedModel:
    """The model's main graph, indexed for matching (its subgraphs and functions are not searched)."""
    dtypes = value_dtypes(model)
    nodes = list(model.graph.node)
    keys = tuple(node_key(n, dtypes) for n in nodes)
    by_op: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(keys):
        by_op.setdefault((key.domain, key.op_type), []).append(i)
    constants = {i.name for i in model.graph.initializer}
    constants |= {n.output[0] for n in nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output}
    return IndexedModel(keys, tuple(tuple(n.input) for n in nodes), tuple(tuple(n.output) for n in nodes),
                        {op: tuple(ids) for op, ids in by_op.items()}, frozenset(constants))


def pattern_of(model: onnx.ModelProto) -> Pattern:
    """The pattern of a (reduced case's) model: its nodes but Constant and Identity, and the edges between them."""
    indexed = index_model(model)
    kept = [i for i, key in enumerate(indexed.keys) if (key.domain, key.op_type) not in IGNORED_OPS]
    position = {node: p for p, node in enumerate(kept)}
    producer = {value: (node, out) for node in kept for out, value in enumerate(indexed.outputs[node]) if value}
    edges = [Edge(position[producer[value][0]], producer[value][1], position[node], slot)
             for node in kept for slot, value in enumerate(indexed.inputs[node]) if value in producer]
    readers: dict[str, list[tuple[int, int]]] = {}
    for node in kept:
        for slot, value in enumerate(indexed.inputs[node]):
            if value and value not in producer and value not in indexed.constants:
                readers.setdefault(value, []).append((position[node], slot))
    shared = tuple(tuple(slots) for slots in readers.values() if len(slots) > 1)
    return Pattern(tuple(indexed.keys[i] for i in kept), tuple(edges), shared)


def occurs_in(pattern: Pattern, model: IndexedModel) -> bool:
    """Whether `model` holds the pattern: distinct nodes matching its nodes, joined by its edges."""
    if not pattern.nodes:
        return False
    return next(_embeddings(pattern, model, _search_order(pattern, model), {}), None) is not None


def _search_order(pattern: Pattern, model: IndexedModel) -> list[int]:
    """Pattern nodes from the one with fewest candidates, each next one joined to those before where it can be."""
    count = {i: len(model.by_op.get((k.domain, k.op_type), ())) for i, k in enumerate(pattern.nodes)}
    neighbours: dict[int, set[int]] = {i: set() for i in range(len(pattern.nodes))}
    for e in pattern.edges:
        neighbours[e.src].add(e.dst)
        neighbours[e.dst].add(e.src)
    order: list[int] = []
    while len(order) < len(pattern.nodes):
        left = [i for i in range(len(pattern.nodes)) if i not in order]
        joined = [i for i in left if neighbours[i] & set(order)] or left
        order.append(min(joined, key=lambda i: (count[i], i)))
    return order


def _embeddings(pattern: Pattern, model: IndexedModel, order: Sequence[int], mapped: dict[int, int]
                ) -> Iterator[dict[int, int]]:
    """Every mapping of the pattern's nodes (in `order`) onto the model's that keeps keys and edges."""
    if len(mapped) == len(order):
        yield dict(mapped)
        return
    node = order[len(mapped)]
    key = pattern.nodes[node]
    used = set(mapped.values())
    for candidate in model.by_op.get((key.domain, key.op_type), ()):
        if candidate in used or not key.matches(model.keys[candidate]):
            continue
        mapped[node] = candidate
        if _edges_hold(pattern, model, mapped, node):
            yield from _embeddings(pattern, model, order, mapped)
        del mapped[node]


def _edges_hold(pattern: Pattern, model: IndexedModel, mapped: Mapping[int, int], node: int) -> bool:
    """Whether every pattern edge between `node` and the nodes mapped before it is an edge of the model, and every
    outside value the pattern's mapped nodes share is one value of the model's."""
    for slots in pattern.shared:
        values = {_input(model, mapped[n], slot) for n, slot in slots if n in mapped}
        if len(values) > 1 or None in values:
            return False
    for e in pattern.edges:
        if node not in (e.src, e.dst) or e.src not in mapped or e.dst not in mapped:
            continue
        outputs, inputs = model.outputs[mapped[e.src]], model.inputs[mapped[e.dst]]
        if e.src_output >= len(outputs) or e.dst_input >= len(inputs) or outputs[e.src_output] != inputs[e.dst_input]:
            return False
    return True


def _input(model: IndexedModel, node: int, slot: int) -> str | None:
    inputs = model.inputs[node]
    return inputs[slot] if slot < len(inputs) else None
