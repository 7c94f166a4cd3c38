"""Edits that repair a converted ONNX model from its source model, one per fault kind: restore a constant, restore a
node's attributes, restore a node (its kind, inputs and the source nodes that feed it), restore an input's layout or
dtype. Each edits a copy and says what it changed."""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import helper


def copied(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _writer(model: onnx.ModelProto, value: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if value in n.output)


@dataclass(frozen=True)
class RestoreConstant:
    """Put the source's tensor back under `name` (an initializer, or a Constant node's value)."""

    name: str
    tensor: bytes  # the source's TensorProto, serialized

    def apply(self, model: onnx.ModelProto) -> onnx.ModelProto:
        out, tensor = copied(model), onnx.TensorProto.FromString(self.tensor)
        tensor.name = self.name
        for init in out.graph.initializer:
            if init.name == self.name:
                init.CopyFrom(tensor)
                return out
        node = _writer(out, self.name)
        del node.attribute[:]
        node.attribute.append(helper.make_attribute("value", tensor))
        return out

    def describe(self) -> str:
        return f"restore constant {self.name} from the source model"


@dataclass(frozen=True)
class RestoreAttributes:
    """Give the node writing `output` the source node's attributes."""

    output: str
    attributes: tuple[bytes, ...]  # the source node's AttributeProtos, serialized

    def apply(self, model: onnx.ModelProto) -> onnx.ModelProto:
        out = copied(model)
        node = _writer(out, self.output)
        del node.attribute[:]
        node.attribute.extend(onnx.AttributeProto.FromString(a) for a in self.attributes)
        return out

    def describe(self) -> str:
        return f"restore the attributes of the node writing {self.output} from the source node"


@dataclass(frozen=True)
class RestoreNode:
    """Replace the node writing `output` by the source's node, and copy in the source nodes (and constants) that
    feed it and that the converted model lacks; dead nodes are left to the runtime."""

    output: str
    source: bytes  # the source ModelProto, serialized

    def apply(self, model: onnx.ModelProto) -> onnx.ModelProto:
        out, src = copied(model), onnx.ModelProto.FromString(self.source)
        index = next(i for i, n in enumerate(out.graph.node) if self.output in n.output)
        missing = _missing_producers(src, out, list(_writer(src, self.output).input))
        new = [*missing, _writer(src, self.output)]
        nodes = list(out.graph.node)
        nodes[index:index + 1] = new
        del out.graph.node[:]
        out.graph.node.extend(topological(nodes, out))
        have = {t.name for t in out.graph.initializer}
        needed = {i for n in new for i in n.input}
        out.graph.initializer.extend(t for t in src.graph.initializer if t.name in needed and t.name not in have)
        return out

    def describe(self) -> str:
        return f"restore the node writing {self.output} (kind, inputs, attributes) and its missing inputs' nodes"


def topological(nodes: list[onnx.NodeProto], model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """`nodes` ordered so that each comes after the writers of its inputs, keeping their order where it can."""
    ready = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer} | {""}
    pending, ordered = list(nodes), []
    while pending:
        at = next((k for k, n in enumerate(pending) if all(i in ready for i in n.input)), 0)
        node = pending.pop(at)
        ordered.append(node)
        ready.update(node.output)
    return ordered


def _missing_producers(src: onnx.ModelProto, tgt: onnx.ModelProto, wanted: list[str]) -> list[onnx.NodeProto]:
    """The source nodes, in source order, that write values `wanted` needs and the converted model does not have."""
    have = {o for n in tgt.graph.node for o in n.output} | {i.name for i in tgt.graph.input} | \
        {t.name for t in tgt.graph.initializer}
    writer = {o: n for n in src.graph.node for o in n.output}
    order = {id(n): i for i, n in enumerate(src.graph.node)}
    chosen: dict[int, onnx.NodeProto] = {}
    todo = list(wanted)
    while todo:
        value = todo.pop()
        if value in have or value not in writer or id(writer[value]) in chosen:
            continue
        chosen[id(writer[value])] = writer[value]
        todo.extend(writer[value].input)
    return sorted(chosen.values(), key=lambda n: order[id(n)])


@dataclass(frozen=True)
class RestoreInput:
    """Give graph input `name` the source's type again, and feed the old input from it through a Transpose (`perm`)
    or a Cast (`cast_to`)."""

    name: str
    source_input: bytes  # the source's ValueInfoProto, serialized
    perm: tuple[int, ...] = ()
    cast_to: int = 0

    def apply(self, model: onnx.ModelProto) -> onnx.ModelProto:
        out = copied(model)
        inner = f"{self.name}__as_converted"
        for node in out.graph.node:
            node.input[:] = [inner if i == self.name else i for i in node.input]
        value = next(v for v in out.graph.input if v.name == self.name)
        value.CopyFrom(onnx.ValueInfoProto.FromString(self.source_input))
        if self.perm:
            fix = helper.make_node("Transpose", [self.name], [inner], perm=list(self.perm))
        else:
            fix = helper.make_node("Cast", [self.name], [inner], to=self.cast_to)
        out.graph.node.insert(0, fix)
        return out

    def describe(self) -> str:
        how = f"a Transpose perm={list(self.perm)}" if self.perm else \
            f"a Cast to {helper.tensor_dtype_to_np_dtype(self.cast_to)}"
        return f"restore input {self.name}'s source type, feeding the converted graph through {how}"


Edit = RestoreConstant | RestoreAttributes | RestoreNode | RestoreInput
