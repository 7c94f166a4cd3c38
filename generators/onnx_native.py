"""A graph materialized straight to ONNX: each node written by its operator's own counterpart (OpSpec.to_onnx).

The ONNX-to-ONNX converters usually start from what torch's exporters emit; a native model shows them graphs no
exporter makes (other spellings, other opsets, operators side by side as a hand-written model has them).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from generators.dtypes import DType
from generators.generator import GenOptions
from generators.ir import Graph, TensorType
from generators.ops.base import OpSpec
from generators.ops.onnx_nodes import OLDEST_OPSET, OnnxCall, element_type
from generators.registry import REGISTRY

# The opsets native models are written at: Squeeze, ReduceSum and Split take their axes and sizes as inputs from
# 13; 21 is the newest every installed tool (onnxsim, onnxslim, onnxoptimizer) and ONNX Runtime read.
NATIVE_OPSETS: tuple[int, int] = (OLDEST_OPSET, 21)
PRODUCER = "convsmith"


def native_ops(opset: int, registry: Mapping[str, OpSpec] = REGISTRY) -> frozenset[str]:
    """The operators that have an ONNX counterpart at `opset` (for some of their dtypes)."""
    return frozenset(name for name, op in registry.items()
                     if op.onnx_since is not None and max(op.onnx_since, OLDEST_OPSET) <= opset)


def node_calls(graph: Graph, opset: int) -> Iterable[tuple[OpSpec, Mapping, OnnxCall]]:
    """Each node's operator, attributes and the OnnxCall its counterpart is written into."""
    for node in graph.nodes:
        call = OnnxCall(node.inputs, node.outputs, tuple(graph.types[n] for n in node.inputs),
                        tuple(graph.types[n] for n in node.outputs), opset)
        yield REGISTRY[node.op], node.attrs, call


def native_nodes(graph: Graph, opset: int) -> list[onnx.NodeProto] | None:
    """Every node's counterpart at `opset`, in graph order; None when some node has none."""
    nodes: list[onnx.NodeProto] = []
    for op, attrs, call in node_calls(graph, opset):
        made = op.to_onnx(attrs, call)
        if made is None:
            return None
        nodes += made
    return nodes


def native_opsets(graph: Graph) -> tuple[int, ...]:
    """The opsets (within NATIVE_OPSETS) at which every node of the graph has a counterpart."""
    low, high = NATIVE_OPSETS
    for node in graph.nodes:  # most random graphs hold an operator or dtype without a counterpart: say so at once
        op = REGISTRY[node.op]
        if op.onnx_since is None or graph.types[(node.inputs or node.outputs)[0]].dtype not in op.onnx_types:
            return ()
    return tuple(opset for opset in range(low, high + 1) if native_nodes(graph, opset) is not None)


def _value_info(name: str, ttype: TensorType) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element_type(ttype.dtype), list(ttype.shape))


def to_onnx_model(graph: Graph, weights: Mapping[str, np.ndarray], opset: int) -> onnx.ModelProto | None:
    """The graph as an ONNX model at `opset`: the IR's input and output names, dtypes and shapes, `weights` (numpy,
    by weight name) as initializers; None when some node has no counterpart at that opset."""
    nodes = native_nodes(graph, opset)
    if nodes is None:
        return None
    initializers = [numpy_helper.from_array(np.asarray(weights[name], dtype=t.dtype.numpy).reshape(t.shape), name)
                    for name, t in graph.weights.items()]
    body = helper.make_graph(nodes, "convsmith_graph", [_value_info(n, t) for n, t in graph.inputs.items()],
                             [_value_info(n, graph.types[n]) for n in graph.outputs], initializers)
    opsets = [helper.make_opsetid("", opset)]
    # The oldest IR version that holds this opset: ONNX Runtime refuses IR versions newer than it knows.
    return helper.make_model(body, opset_imports=opsets, producer_name=PRODUCER,
                             ir_version=helper.find_min_ir_version_for(opsets))


def missing_counterparts(graph: Graph, opset: int) -> list[str]:
    """'op (dtype)' of each node without a counterpart at `opset`, for messages."""
    missing = [f"{op.name} ({call.dtype.value})" for op, attrs, call in node_calls(graph, opset)
               if op.to_onnx(attrs, call) is None]
    return list(dict.fromkeys(missing))


def native_gen_options(opts: GenOptions, registry: Mapping[str, OpSpec] = REGISTRY) -> GenOptions | None:
    """`opts` narrowed to graphs a native model can be written for: only operators with a counterpart (among those
    `opts` allows) and none of their dtypes ONNX Runtime does not run; None when `opts` allows no such operator."""
    narrowed = _native_narrowing(opts.include_ops, opts.exclude_ops, opts.avoid_pairs, registry)
    if narrowed is None:
        return None
    ops, avoid = narrowed
    return dataclasses.replace(opts, include_ops=ops, exclude_ops=(), avoid_pairs=avoid)


@functools.lru_cache(maxsize=16)
def _native_narrowing(include: tuple[str, ...], exclude: tuple[str, ...], avoid_pairs: frozenset[tuple[str, str]],
                      registry: Mapping[str, OpSpec]) -> tuple[tuple[str, ...], frozenset[tuple[str, str]]] | None:
    """The operators and the avoided pairs of native_gen_options, made once per campaign: the same avoided-pairs set
    for every graph also lets the generator's operator table be cached on it."""
    allowed = set(include or registry) - set(exclude)
    ops = tuple(sorted(allowed & native_ops(NATIVE_OPSETS[1], registry)))
    if not ops:
        return None
    avoid = {(name, s.key_dtype.value) for name in ops for s in registry[name].sigs}
    avoid = {(name, dtype) for name, dtype in avoid if DType(dtype) not in registry[name].onnx_types}
    return ops, avoid_pairs | avoid
