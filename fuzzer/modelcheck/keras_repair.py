"""tf2onnx's wrong model, against the Keras model it came from: the first wrong layer (keras_layers.py), the
constants its node reads matched with the layer's weights in whatever layout tf2onnx gave them (a kernel moved to
channels-first, a batch norm folded into the convolution before it), those that differ restored, and the repaired
model re-verified against Keras on fresh inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from fuzzer.modelcheck.diagnose import Finding
from fuzzer.modelcheck.keras_layers import locate_keras_layer
from fuzzer.modelcheck.keras_model import keras_outputs
from fuzzer.modelcheck.locate import Location
from fuzzer.modelcheck.repair import Repair, Round, edited_and_verified
from fuzzer.modelcheck.runs import judge_all, run_onnx
from fuzzer.modelcheck.weights import fold_batch_norm, weight_findings


def passes_keras(keras: Any, target: bytes, feeds: Mapping[str, np.ndarray]) -> bool:
    """Whether the ONNX model runs and agrees with Keras on the same inputs (fed in order)."""
    try:
        actual = run_onnx(target, feeds)
    except Exception:  # ONNX Runtime refused or failed on the candidate: it is not a repair
        return False
    expected = keras_outputs(keras, list(feeds.values()))
    return len(actual) == len(expected) and all(m.ok for m in judge_all(actual, expected))


def layer_weights(keras: Any, name: str) -> list[np.ndarray]:
    """The layer's weights, and where it is a batch norm after a convolution, the convolution's kernel and bias
    with the batch norm folded in (as tf2onnx folds them)."""
    layer = keras.get_layer(name)
    found = [np.asarray(w) for w in layer.get_weights()]
    return found + folded_weights(layer)


def folded_weights(bn: Any) -> list[np.ndarray]:
    """A batch norm's scale and shift folded into the (depthwise) convolution feeding it; [] for any other layer."""
    if type(bn).__name__ != "BatchNormalization" or not bn.inbound_nodes:
        return []
    conv = bn.inbound_nodes[0].inbound_layers
    if type(conv).__name__ not in ("Conv2D", "DepthwiseConv2D"):
        return []
    names = [w.name.split("/")[-1].split(":")[0] for w in bn.weights]
    values = dict(zip(names, (np.asarray(w) for w in bn.get_weights()), strict=True))
    channels = values["moving_mean"].shape[0]
    weights = conv.get_weights()
    kernel = np.asarray(weights[0])
    flat = kernel.reshape(*kernel.shape[:2], -1) if type(conv).__name__ == "DepthwiseConv2D" else kernel
    folded, shift = fold_batch_norm(flat, weights[1] if len(weights) > 1 else None,
                                    values.get("gamma", np.ones(channels)), values.get("beta", np.zeros(channels)),
                                    values["moving_mean"], values["moving_variance"], bn.epsilon, out_axis=-1)
    return [folded.reshape(kernel.shape), shift]


def parameter_findings(keras: Any, target: onnx.ModelProto, where: Location) -> list[Finding]:
    """The located node's constants that, in some layout, are mostly a weight of its layer and differ from it."""
    names = list(target.graph.node[where.index].input)
    return weight_findings(target, names, layer_weights(keras, where.layer), where.output, where.layer)


def repair_keras_export(keras: Any, target: bytes, feeds: Mapping[str, np.ndarray],
                        fresh: Mapping[str, np.ndarray]) -> Repair:
    """One round: locate the Keras layer, restore the constants its node reads from the layer's weights; repaired
    only when the model then agrees with Keras on the inputs and on fresh ones."""
    where = locate_keras_layer(keras, list(feeds.values()), target, feeds)
    if where is None:
        return Repair((Round(None, ()),), None, False, "no mapped layer diverges")
    findings = parameter_findings(keras, onnx.load_from_string(target), where)
    rounds = (Round(where, tuple(findings)),)
    if not findings:
        return Repair(rounds, None, False, "no constant of the located node differs from its layer's weights")
    return edited_and_verified(rounds, target, findings, lambda model, inputs: passes_keras(keras, model, inputs),
                               feeds, fresh)
