"""The first wrong Keras layer of tf2onnx's model: tf2onnx names each value '<model>/<layer>/<op>:0', so each value
maps to the Keras layer it comes from; the last value of each layer stands for the layer's output, and one run of
Keras (every layer's output at once) and one of the ONNX model (those values as extra outputs) are compared layer by
layer. tf2onnx computes channels-first where Keras is channels-last: a value is compared in either layout."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fuzzer.converters.tf2onnx_exporter import import_quietly
from fuzzer.modelcheck.locate import Location, intermediate_values
from fuzzer.modelcheck.runs import judge
from oracles.compare import OutputComparison

# A fused run (a convolution and its batch norm, an activation folded into it) leaves its value under one layer's
# name: a value matching one of the next layers' outputs is not a divergence.
FUSION_REACH = 3
# Channels-first (ONNX's convolutions) to channels-last (Keras), by rank.
TO_CHANNELS_LAST = {3: (0, 2, 1), 4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


@dataclass(frozen=True)
class KerasLayerOutput:
    layer: str
    value: np.ndarray


def keras_layer_outputs(model: Any, inputs: Sequence[np.ndarray]) -> list[KerasLayerOutput]:
    """Every layer's output in one run of a functional model, in the model's layer order (a layer used twice, with
    no single output, is left out)."""
    tf_keras = import_quietly("tf_keras")
    layers, tensors = [], []
    for layer in model.layers:
        if isinstance(layer, tf_keras.layers.InputLayer):
            continue
        try:
            out = layer.output
        except AttributeError:  # a layer called more than once has no single output
            continue
        if not isinstance(out, (list, tuple)):
            layers.append(layer.name)
            tensors.append(out)
    probe = tf_keras.Model(model.inputs, tensors)
    values = probe([np.asarray(x) for x in inputs] if len(inputs) > 1 else np.asarray(inputs[0]), training=False)
    values = values if isinstance(values, (list, tuple)) else [values]
    return [KerasLayerOutput(name, np.asarray(v)) for name, v in zip(layers, values, strict=True)]


def value_layer(value: str, node: onnx.NodeProto, layers: set[str]) -> str:
    """The Keras layer a tf2onnx value comes from, by the value's name, else its node's (a node tf2onnx fused from
    two keeps the layer in its name only), else the value itself where it is an output named after the layer; ''
    for none. A helper node tf2onnx added (a Transpose to channels-first) maps to its layer too: its value has
    another shape, and is passed over."""
    for name in (value, node.name):
        layer = next((part for part in name.split("/")[:-1] if part in layers), "")
        if layer:
            return layer
    return value if value in layers else ""


def last_layer_values(model: onnx.ModelProto, layers: set[str]) -> dict[str, tuple[int, str]]:
    """Each layer's last value in node order (the node's index and the value)."""
    last: dict[str, tuple[int, str]] = {}
    for index, node in enumerate(model.graph.node):
        for out in node.output:
            layer = value_layer(out, node, layers) if out else ""
            if layer:
                last[layer] = (index, out)
    return last


def compare_layouts(got: np.ndarray, expected: np.ndarray) -> OutputComparison | None:
    """The value against Keras's as it is, else moved to channels-last; None when neither layout has its shape."""
    tried = [got] if got.shape == expected.shape else []
    perm = TO_CHANNELS_LAST.get(got.ndim)
    if perm and tuple(got.shape[p] for p in perm) == expected.shape and perm != tuple(range(got.ndim)):
        tried.append(np.transpose(got, perm))
    # Keras (oneDNN) and ONNX Runtime sum in other orders: deep inside a large network a layer's values drift by more
    # than the outputs' absolute tolerance where they are large, so each layer is judged in units of its own range.
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    metrics = [dataclasses.replace(m, max_abs=m.max_abs * scale)  # said in the layer's own units
               for m in (judge(t / scale, expected / scale) for t in tried)]
    return next((m for m in metrics if m.ok), metrics[0] if metrics else None)


def locate_keras_layer(keras: Any, inputs: Sequence[np.ndarray], target: bytes, feeds: Mapping[str, np.ndarray]
                       ) -> Location | None:
    """The first Keras layer whose tf2onnx value diverges from the layer's output (and from the next layers', for a
    fused run), named by the node writing it; None where no mapped layer diverges."""
    model = onnx.load_from_string(target)
    outputs = keras_layer_outputs(keras, inputs)
    last = last_layer_values(model, {o.layer for o in outputs})
    wanted = [at for at, o in enumerate(outputs) if o.layer in last]
    values = intermediate_values(model, sorted({last[outputs[at].layer][1] for at in wanted}), feeds)
    before = 0.0
    for at in wanted:
        index, value = last[outputs[at].layer]
        nearby = [m for o in outputs[at:at + FUSION_REACH] if (m := compare_layouts(values[value], o.value))]
        if not nearby:
            continue
        matched = [m.max_abs for m in nearby if m.ok]
        if matched:
            before = max(before, min(matched))
            continue
        node = model.graph.node[index]
        return Location(node.op_type, node.name, value, index, outputs[at].layer, before, nearby[0].max_abs,
                        len(wanted))
    return None
