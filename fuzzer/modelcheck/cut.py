"""The smallest ONNX subgraph of a model that still shows an ONNX tool's failure on it: the failing node is located
(the first diverging value, or the first node whose prefix the tool fails on), then subgraphs growing from it, node
by node in breadth-first order over its neighbours, are cut out (the source's values at their boundary become their
inputs) and given to the tool, until one shows the same symptom; none past MAX_CUT_NODES nodes.

A cut keeps the initializers its nodes read; a Constant node it reads becomes an initializer (not a node) of the cut.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from fuzzer.converters.base import Converter
from fuzzer.modelcheck.conversions import Conversion, convert_onnx, onnx_source
from fuzzer.modelcheck.locate import intermediate_values, locate, produced
from fuzzer.modelcheck.model import InputSlot, ModelKind, UserModel
from fuzzer.modelcheck.runs import dtype_of
from oracles.verdict import Symptom

MAX_CUT_NODES = 10


@dataclass(frozen=True)
class Cut:
    """A subgraph that shows the failure: the model, its inputs (the source's values there), where it was cut from
    and the tool's verdict on it."""

    model: onnx.ModelProto
    inputs: tuple[np.ndarray, ...]
    start: str  # the failing node of the whole model it grew from (its name, else its first output)
    start_op: str
    conversion: Conversion
    start_dtype: str | None = None  # the dtype of the failing node's first input, where the source computed it

    @property
    def nodes(self) -> int:
        return len(self.model.graph.node)


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Initializers and Constant nodes' tensors, by value name."""
    found = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR),
                         None)
            if value is not None:
                tensor = onnx.TensorProto()
                tensor.CopyFrom(value)
                tensor.name = node.output[0]
                found[node.output[0]] = tensor
    return found


def _is_constant(node: onnx.NodeProto) -> bool:
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx")


def cut_model(model: onnx.ModelProto, nodes: Sequence[int], values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The subgraph of `nodes` (indices of `model`'s nodes, kept in the model's order): the values its nodes read and
    do not write become inputs (typed by `values`, the source's), constants initializers, and what its nodes write
    that the rest of the model or its outputs read become outputs."""
    graph, kept = model.graph, sorted(set(nodes))
    constants = _constants(model)
    chosen = [graph.node[i] for i in kept]
    written = {out for node in chosen for out in node.output if out}
    read = [x for node in chosen for x in node.input if x]
    outside = {x for i, node in enumerate(graph.node) if i not in set(kept) for x in node.input}
    outside |= {o.name for o in graph.output}
    inputs = [x for x in dict.fromkeys(read) if x not in written and x not in constants]
    outputs = [out for node in chosen for out in node.output if out and out in outside] or [chosen[-1].output[0]]
    initializers = [constants[x] for x in dict.fromkeys(read) if x not in written and x in constants]
    sub = helper.make_graph(list(chosen), f"{graph.name}_cut", [_typed(x, values) for x in inputs],
                            [_typed(o, values) for o in outputs], initializers)
    cut = helper.make_model(sub, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    return cut


def _typed(name: str, values: Mapping[str, np.ndarray]) -> onnx.ValueInfoProto:
    """A value's info, typed and shaped as the source computed it (untyped where it did not)."""
    if name not in values:
        return onnx.ValueInfoProto(name=name)
    x = values[name]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)


def growing(model: onnx.ModelProto, start: int, limit: int = MAX_CUT_NODES) -> Iterator[list[int]]:
    """Node sets from `start` alone, one neighbour (a producer or a consumer, breadth-first, Constant nodes left
    out) added at a time, up to `limit` nodes."""
    graph = model.graph
    writer = produced(model)
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for x in node.input:
            readers.setdefault(x, []).append(i)
    chosen, queue, seen = [start], deque([start]), {start}
    yield list(chosen)
    while queue and len(chosen) < limit:
        node = graph.node[queue.popleft()]
        around = [writer[x] for x in node.input if x in writer]
        around += [r for out in node.output for r in readers.get(out, ())]
        for other in around:
            if other in seen or _is_constant(graph.node[other]):
                continue
            seen.add(other)
            chosen.append(other)
            queue.append(other)
            yield list(chosen)
            if len(chosen) >= limit:
                return


def tool_on(model: onnx.ModelProto, inputs: Sequence[np.ndarray], converter: Converter, label: str,
            options: Mapping[str, Any] | None = None) -> Conversion:
    """The ONNX tool's verdict on `model` fed `inputs` as its upstream, against the model's own run
    (fuzzer/modelcheck/conversions), under `options` (a finding's) where given, its upstream and opset the model's."""
    slots = tuple(InputSlot(i.name, tuple(x.shape), dtype_of(x))
                  for i, x in zip(_data_inputs(model), inputs, strict=True))
    user = UserModel(ModelKind.ONNX, label, slots, tuple(inputs), onnx_model=model)
    prepared = onnx_source(user)
    return convert_onnx(dataclasses.replace(prepared, options=tool_options(options, prepared.options)), converter)


def tool_options(options: Mapping[str, Any] | None, upstream: Mapping[str, Any]) -> dict[str, Any]:
    """A finding's options, but for the upstream and opset: those of the model the tool is given."""
    kept = {k: v for k, v in (options or {}).items() if k not in ("upstream", "opset")}
    return {**kept, **upstream}


def _data_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def failing_node(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], whole: Conversion, converter: Converter,
                 options: Mapping[str, Any] | None = None) -> int | None:
    """The index of the node the failure starts at: for a wrong model, the node writing the first diverging value;
    for a crash, the last node of the shortest prefix of the model the tool fails on (found by bisection)."""
    data = model.SerializeToString()
    if whole.verdict.symptom in Symptom.divergences() and whole.target_onnx is not None:
        location = locate(data, whole.target_onnx, feeds)
        return produced(model).get(location.output) if location is not None else None
    names = [n.output[0] for n in model.graph.node if n.output and not _is_constant(n)]
    values = intermediate_values(model, names, feeds)
    fails = {}

    def prefix_fails(k: int) -> bool:  # the model up to the node writing names[k - 1], cut at its inputs
        if k not in fails:
            nodes = [i for i, n in enumerate(model.graph.node) if i <= produced(model)[names[k - 1]]]
            cut = cut_model(model, nodes, {**feeds, **values})
            cut_inputs = tuple({**feeds, **values}[i.name] for i in _data_inputs(cut))
            found = tool_on(cut, cut_inputs, converter, "prefix", options).verdict
            fails[k] = found.symptom is whole.verdict.symptom
        return fails[k]

    low, high = 0, len(names)  # names[:low] pass; names[:high] fail
    if not prefix_fails(high):
        return None
    while high - low > 1:
        mid = (low + high) // 2
        if prefix_fails(mid):
            high = mid
        else:
            low = mid
    return produced(model)[names[high - 1]]


def smallest_cut(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], converter: Converter, whole: Conversion,
                 options: Mapping[str, Any] | None = None) -> Cut | None:
    """The smallest subgraph grown from the failing node on which the tool shows the same symptom as on the whole
    model; None where the node is not found or no cut of at most MAX_CUT_NODES nodes shows it."""
    return next(failing_cuts(model, feeds, converter, whole, options), None)


def failing_cuts(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], converter: Converter, whole: Conversion,
                 options: Mapping[str, Any] | None = None) -> Iterator[Cut]:
    """Every subgraph grown from the failing node, smallest first, on which the tool shows the same symptom as on
    the whole model (none where the node is not found)."""
    start = failing_node(model, feeds, whole, converter, options)
    if start is None:
        return
    names = [out for node in model.graph.node for out in node.output if out]
    values = {**feeds, **intermediate_values(model, names, feeds)}
    node = model.graph.node[start]
    for nodes in growing(model, start):
        cut = cut_model(model, nodes, values)
        inputs = tuple(values[i.name] for i in _data_inputs(cut))
        conversion = tool_on(cut, inputs, converter, f"cut of {len(nodes)} nodes", options)
        if conversion.verdict.symptom is whole.verdict.symptom:
            first = values.get(node.input[0]) if node.input else None
            yield Cut(cut, inputs, node.name or node.output[0], node.op_type, conversion,
                      dtype_of(first) if first is not None else None)
