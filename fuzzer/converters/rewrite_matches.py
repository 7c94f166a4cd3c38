"""What a rewrite matched: the nodes of the model before it that the model after it no longer has unchanged (a node by
its operator, inputs, outputs and attributes; an If/Loop node whose body changed counts as its body's nodes), in
their scopes, types inferred; the labels (edge_classes.match_labels) of each rewrite a tool fired, from a replay one
rewrite at a time (ClassTracker) or, where the tool tells only which fired, from everything its call changed
(attributed)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import onnx

from fuzzer.converters.edge_classes import OP_PREFIX, EdgeClass, Match, Scope, class_names, match_labels, scope_of

NodeKey = tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[bytes, ...]]


def node_key(node: onnx.NodeProto) -> NodeKey:
    """A node by what it computes (its name aside); a body's content aside, so a node whose body changed is not
    itself counted as changed: the body's nodes are."""
    attrs = tuple(sorted(a.SerializeToString() if a.type not in _GRAPH_ATTRS else a.name.encode()
                         for a in node.attribute))
    return node.domain or "", node.op_type, tuple(node.input), tuple(node.output), attrs


_GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def _walk(graph: onnx.GraphProto, depth: int = 0, outer: Scope | None = None) -> Iterator[
        tuple[Scope, onnx.GraphProto]]:
    scope = scope_of(graph, depth, outer)
    yield scope, graph
    for node in graph.node:
        for attr in node.attribute:
            bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for body in bodies:
                yield from _walk(body, depth + 1, scope)


def model_keys(model: onnx.ModelProto) -> set[NodeKey]:
    """The keys (node_key) of every node of `model`, its bodies' too."""
    return {node_key(node) for _, graph in _walk(model.graph) for node in graph.node}


def typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its intermediate values' types inferred where ONNX's shape inference can (as is where not, or
    where the main graph already types every value its nodes make: onnxsim's output does)."""
    graph = model.graph
    known = {v.name for v in (*graph.value_info, *graph.output)}
    if all(name in known for node in graph.node for name in node.output if name):
        return model
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model inference rejects still has the classes its declared types give
        return model


def changed_matches(before: onnx.ModelProto, after_keys: set[NodeKey]) -> tuple[Match, ...]:
    """Per scope of `before`, the nodes absent from the model after the rewrite (`after_keys`): what it matched."""
    matches = []
    for scope, graph in _walk(before.graph):
        nodes = tuple(node for node in graph.node if node_key(node) not in after_keys)
        if nodes:
            matches.append(Match(nodes, scope))
    return tuple(matches)


def changed_classes(before: onnx.ModelProto, after: onnx.ModelProto) -> frozenset[EdgeClass]:
    """The classes of the nodes of `before` (types inferred) that `after` no longer has unchanged."""
    return frozenset(EdgeClass(label) for label in changed_labels(before, after) if not label.startswith(OP_PREFIX))


def changed_labels(before: onnx.ModelProto, after: onnx.ModelProto) -> frozenset[str]:
    """match_labels of the nodes of `before` (types inferred) that `after` no longer has unchanged."""
    return match_labels(changed_matches(before, model_keys(after)))


class ClassTracker:
    """The classes of each rewrite of a tool that runs them one at a time: given each model it produces in turn
    (`step`), the classes of what a rewrite changed from the model before it (types inferred on that model)."""

    def __init__(self, start: onnx.ModelProto) -> None:
        self.model = start
        self.found: dict[str, frozenset[str]] = {}

    def step(self, name: str, after: onnx.ModelProto) -> None:
        """`after` is the model `name` made of the current one (which it then becomes); called only where `name`
        changed it, so a run where nothing fires infers no types."""
        try:
            found = changed_labels(typed(self.model), after)
        except Exception:  # a model the classes cannot be read from keeps the rewrite's name, with no classes
            found = frozenset()
        self.found[name] = self.found.get(name, frozenset()) | found
        self.model = after

    def fired(self, names: tuple[str, ...]) -> Fired:
        """`names` (the rewrites that fired, in order) with the classes each met."""
        return Fired(names, {name: class_names(self.found.get(name, frozenset())) for name in names})


@dataclass(frozen=True)
class Fired:
    """The rewrites that fired (in order) and, per rewrite, the labels of what it matched (match_labels)."""

    names: tuple[str, ...] = ()
    classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def attributed(names: tuple[str, ...], before: onnx.ModelProto, after: onnx.ModelProto) -> Fired:
    """`names` each given the classes of everything the whole run changed: for a tool that tells which rewrites fired
    but not what each matched (ONNX Runtime's log, a fusion count). Coarse where several fire; none are inferred where
    none fired."""
    if not names:
        return Fired()
    found = class_names(changed_labels(typed(before), after))
    return Fired(names, {name: found for name in names})
