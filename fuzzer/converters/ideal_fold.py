"""The fold a tool should make of a BatchNormalization into the Conv before it in a half type (float16, bfloat16):
computed in float32 from the model's half weights, each folded weight rounded once to the half type. The oracle
judges a tool's folded model against this one (fuzzer/check/fold_rounding.py; bench/fold_rounding.py measured it)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

HALF_TYPES = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
_DEFAULT_EPSILON = 1e-5


def _constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    found = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                found[node.output[0]] = value
    return found


def _to_float32(tensor: onnx.TensorProto) -> np.ndarray:
    return numpy_helper.to_array(tensor).astype(np.float32)  # bfloat16 reads as float32 already (onnx >= 1.15)


def _to_half(values: np.ndarray, data_type: int, name: str) -> onnx.TensorProto:
    if data_type == TensorProto.FLOAT16:
        return numpy_helper.from_array(values.astype(np.float16), name)
    return onnx.helper.make_tensor(name, TensorProto.BFLOAT16, values.shape, values.flatten().tolist())


def foldable(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, onnx.NodeProto]]:
    """The (Conv, BatchNormalization) pairs of the main graph a fold can take: the Conv's only consumer is the batch
    norm, its weights and the batch norm's parameters are constants of a half type, and the batch norm is inference
    mode (one output)."""
    graph, constants = model.graph, _constants(model.graph)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {v.name for v in graph.output}
    pairs = []
    for conv in graph.node:
        if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or conv.output[0] in outputs:
            continue
        users = consumers.get(conv.output[0], [])
        if len(users) != 1 or users[0].op_type != "BatchNormalization" or len(users[0].output) != 1:
            continue
        names = [*conv.input[1:], *users[0].input[1:]]
        tensors = [constants.get(name) for name in names if name]
        if len(tensors) == len([n for n in names if n]) and all(t is not None and t.data_type in HALF_TYPES
                                                                for t in tensors):
            pairs.append((conv, users[0]))
    return pairs


def ideal_fold(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """`model` with every foldable Conv+BatchNormalization folded in float32 and rounded once; None where there is
    none to fold."""
    pairs = foldable(model)
    if not pairs:
        return None
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph, constants = folded.graph, _constants(model.graph)
    for index, (conv, norm) in enumerate(pairs):
        weight = constants[conv.input[1]]
        scale, beta, mean, var = (_to_float32(constants[name]) for name in norm.input[1:5])
        epsilon = next((a.f for a in norm.attribute if a.name == "epsilon"), _DEFAULT_EPSILON)
        factor = scale / np.sqrt(var + np.float32(epsilon))
        w = _to_float32(weight)
        w = w * factor.reshape((-1,) + (1,) * (w.ndim - 1))
        bias = _to_float32(constants[conv.input[2]]) if len(conv.input) > 2 and conv.input[2] else \
            np.zeros(w.shape[0], np.float32)
        b = (bias - mean) * factor + beta
        names = (f"ideal_fold_w{index}", f"ideal_fold_b{index}")
        graph.initializer.extend([_to_half(w, weight.data_type, names[0]), _to_half(b, weight.data_type, names[1])])
        node = next(n for n in graph.node if list(n.output) == list(conv.output) and n.op_type == "Conv")
        del node.input[:]
        node.input.extend([conv.input[0], *names])
        node.output[0] = norm.output[0]
        graph.node.remove(next(n for n in graph.node if list(n.output) == list(norm.output)
                               and n.op_type == "BatchNormalization"))
    return folded
