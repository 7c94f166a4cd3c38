"""What kind of fault a located node shows, Fix-Con's four: input (a graph input of another layout or dtype than the
source's), parameter (a constant that differs from the source's same-named one, or is its rounding to a narrower
float), hyperparameter (an attribute dropped, added or changed against the source node) and graph (a node of
another kind, or fed by other values: a node missing or extra). Each finding carries the edit that repairs it."""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper

from fuzzer.modelcheck.edits import Edit, RestoreAttributes, RestoreConstant, RestoreInput, RestoreNode
from fuzzer.modelcheck.locate import Location

# The narrower floats a converter may round a constant to, widest first.
ROUNDINGS = (("float32", np.float32), ("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16))


class FaultKind(str, enum.Enum):
    INPUT = "input"
    PARAMETER = "parameter"
    HYPERPARAMETER = "hyperparameter"
    GRAPH = "graph"


@dataclass(frozen=True)
class Finding:
    """One fault: its kind, what differs in a sentence, the edit that undoes it, and where."""

    kind: FaultKind
    detail: str
    edit: Edit
    at: str = ""  # the value written by the node at fault ('' for an input)

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind.value, "detail": self.detail, "edit": self.edit.describe(), "node_output": self.at}


def input_findings(source: onnx.ModelProto, target: onnx.ModelProto) -> list[Finding]:
    """Graph inputs whose dtype or layout differ from the source's same-named input; one finding per layout that
    fits (equal dimensions make several), to be told apart by the oracle."""
    targets = {v.name: v for v in target.graph.input}
    found: list[Finding] = []
    for value in source.graph.input:
        other = targets.get(value.name)
        if other is None or other.type == value.type:
            continue
        s_type, t_type = value.type.tensor_type, other.type.tensor_type
        data = value.SerializeToString()
        if s_type.elem_type != t_type.elem_type:
            detail = (f"input {value.name} is {dtype_name(t_type.elem_type)} where the source takes "
                      f"{dtype_name(s_type.elem_type)}")
            found.append(Finding(FaultKind.INPUT, detail, RestoreInput(value.name, data, cast_to=t_type.elem_type)))
            continue
        s_dims, t_dims = _dims(s_type), _dims(t_type)
        for perm in _layouts(s_dims, t_dims):
            detail = f"input {value.name} has layout {t_dims} where the source takes {s_dims} (perm {list(perm)})"
            found.append(Finding(FaultKind.INPUT, detail, RestoreInput(value.name, data, perm=perm)))
    return found


def dtype_name(elem_type: int) -> str:
    """'float16' for TensorProto.FLOAT16."""
    return str(helper.tensor_dtype_to_np_dtype(elem_type))


def _dims(tensor: onnx.TypeProto.Tensor) -> tuple[int, ...]:
    return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)


def _layouts(source: tuple[int, ...], target: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """The permutations p with source[p[i]] == target[i], the identity left out."""
    if len(source) != len(target) or len(source) > 6:
        return
    for perm in itertools.permutations(range(len(source))):
        if perm != tuple(range(len(source))) and all(source[p] == t for p, t in zip(perm, target)):
            yield perm


def node_findings(source: onnx.ModelProto, target: onnx.ModelProto, where: Location) -> list[Finding]:
    """What differs at the located node against the source node writing the same value (its constants, its kind and
    inputs, its attributes); where nothing does, at its nearest ancestor that differs (a fault below the tolerance
    there, amplified later, as a normalization amplifies a slightly wrong embedding)."""
    found = findings_at(source, target, target.graph.node[where.index], where.output)
    return found or upstream_findings(source, target, where)


def findings_at(source: onnx.ModelProto, target: onnx.ModelProto, node: onnx.NodeProto, output: str
                ) -> list[Finding]:
    """What differs at one node of the converted model against the source node writing `output`."""
    twin = next((n for n in source.graph.node if output in n.output), None)
    if twin is None:
        return []
    found = _constant_findings(source, target, node, output)
    if node.op_type == "Constant" and twin.op_type == "Constant":
        return found or _constant_node(source, twin, node)
    if (node.op_type, node.domain) != (twin.op_type, twin.domain) or list(node.input) != list(twin.input):
        return found + [Finding(FaultKind.GRAPH, _graph_detail(source, target, node, twin),
                                RestoreNode(output, source.SerializeToString()), output)]
    attrs = _attribute_changes(twin, node)
    if attrs:
        edit = RestoreAttributes(output, tuple(a.SerializeToString() for a in twin.attribute))
        found.append(Finding(FaultKind.HYPERPARAMETER, f"{node.op_type} {node.name or output}: {attrs}", edit,
                             output))
    return found


def upstream_findings(source: onnx.ModelProto, target: onnx.ModelProto, where: Location) -> list[Finding]:
    """The findings of the nearest ancestor of the located node (breadth first) that has any."""
    writer = {o: n for n in target.graph.node for o in n.output if o}
    written = {o for n in source.graph.node for o in n.output}
    queue, seen = list(target.graph.node[where.index].input), set()
    while queue:
        value = queue.pop(0)
        if value in seen or value not in writer:
            continue
        seen.add(value)
        node = writer[value]
        if value in written:
            found = findings_at(source, target, node, value)
            if found:
                return found
        queue.extend(node.input)
    return []


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    table = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            values = [a.t for a in node.attribute if a.name == "value"]
            if values:
                table[node.output[0]] = values[0]
    return table


def _constant_findings(source: onnx.ModelProto, target: onnx.ModelProto, node: onnx.NodeProto, output: str
                       ) -> list[Finding]:
    ours, theirs = _constants(target), _constants(source)
    found = []
    for name in node.input:
        if name not in ours or name not in theirs:
            continue
        detail = constant_difference(name, numpy_helper.to_array(theirs[name]), numpy_helper.to_array(ours[name]))
        if detail:
            edit = RestoreConstant(name, theirs[name].SerializeToString())
            found.append(Finding(FaultKind.PARAMETER, detail, edit, output))
    return found


def _constant_node(source: onnx.ModelProto, twin: onnx.NodeProto, node: onnx.NodeProto) -> list[Finding]:
    """A Constant node whose value is not the source's is a parameter fault, though the value is an attribute."""
    if list(twin.attribute) == list(node.attribute):
        return []
    tensor = _constants(source)[twin.output[0]]
    return [Finding(FaultKind.PARAMETER, f"constant {twin.output[0]} differs from the source's",
                    RestoreConstant(twin.output[0], tensor.SerializeToString()), twin.output[0])]


def constant_difference(name: str, source: np.ndarray, target: np.ndarray) -> str:
    """'' when equal; else how they differ: another shape or dtype, a rounding to a narrower float, two axes swapped,
    or values."""
    if source.shape != target.shape or source.dtype != target.dtype:
        return f"constant {name} is {target.dtype}{list(target.shape)}, the source's {source.dtype}{list(source.shape)}"
    if np.array_equal(source, target, equal_nan=source.dtype.kind == "f"):
        return ""
    if source.dtype.kind == "f":
        for label, narrow in ROUNDINGS:
            if np.dtype(narrow).itemsize < source.dtype.itemsize and \
                    np.array_equal(source.astype(narrow).astype(source.dtype), target):
                return f"constant {name} is the source's rounded to {label}"
    swapped = next((pair for pair in itertools.combinations(range(source.ndim), 2)
                    if source.shape[pair[0]] == source.shape[pair[1]] and
                    np.array_equal(np.swapaxes(source, *pair), target)), None)
    if swapped:
        return f"constant {name} is the source's with axes {swapped[0]} and {swapped[1]} swapped (transposed)"
    diff = float(np.max(np.abs(target.astype(np.float64) - source.astype(np.float64))))
    return f"constant {name} differs from the source's (max abs {diff:.3g})"


def _attribute_changes(source: onnx.NodeProto, target: onnx.NodeProto) -> str:
    ours = {a.name: a for a in target.attribute}
    theirs = {a.name: a for a in source.attribute}
    changes = [f"{n} dropped (source: {helper.get_attribute_value(theirs[n])})" for n in theirs if n not in ours]
    changes += [f"{n} added ({helper.get_attribute_value(ours[n])})" for n in ours if n not in theirs]
    changes += [f"{n} {helper.get_attribute_value(ours[n])} where the source has {helper.get_attribute_value(a)}"
                for n, a in theirs.items() if n in ours and ours[n] != a]
    return "; ".join(changes)


def _graph_detail(source: onnx.ModelProto, target: onnx.ModelProto, node: onnx.NodeProto,
                  twin: onnx.NodeProto) -> str:
    if (node.op_type, node.domain) != (twin.op_type, twin.domain):
        return f"node {node.name or node.output[0]} is {node.op_type} where the source has {twin.op_type}"
    values = {o for n in target.graph.node for o in n.output} | {i.name for i in target.graph.input}
    lost = [i for i in twin.input if i and i not in values and i not in {t.name for t in target.graph.initializer}]
    if lost:
        writers = [n.op_type for n in source.graph.node if set(n.output) & set(lost)]
        return f"{node.op_type} {node.name or node.output[0]}: the source's {', '.join(writers)} before it is missing"
    extra = [i for i in node.input if i not in twin.input]
    writers = [n.op_type for n in target.graph.node if set(n.output) & set(extra)]
    return f"{node.op_type} {node.name or node.output[0]} reads {extra} through an extra {', '.join(writers)}"
