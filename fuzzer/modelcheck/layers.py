"""The first wrong layer of an exporter's model: each ONNX node is mapped to the source layer the exporter recorded
(the dynamo exporter's name scopes, TorchScript's scope names), the last node of each layer stands for the layer's
output, and one run of the module (forward hooks) and one of the ONNX model (those values as extra outputs) are
compared layer by layer, in the order the module finishes them."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import torch

from fuzzer.modelcheck.locate import NAME_SCOPES, Location, intermediate_values
from fuzzer.modelcheck.runs import judge

# A fused run of layers (a convolution and its batch norm, a linear layer and its activation) leaves its value under
# the first layer's name: a value matching one of the next layers' outputs is not a divergence.
FUSION_REACH = 3


@dataclass(frozen=True)
class LayerOutput:
    layer: str
    value: np.ndarray


def layer_outputs(module: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> list[LayerOutput]:
    """Every submodule's (first) tensor output in one run, in the order the submodules finish."""
    seen: list[LayerOutput] = []
    handles = []
    for name, sub in module.named_modules():
        if not name:
            continue

        def hook(_m: torch.nn.Module, _i: object, out: object, name: str = name) -> None:
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            if isinstance(first, torch.Tensor):
                seen.append(LayerOutput(name, first.detach().cpu().numpy().copy()))
        handles.append(sub.register_forward_hook(hook))
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def node_layer(node: onnx.NodeProto, modules: set[str]) -> str:
    """The deepest module the exporter says the node comes from; '' where it says none."""
    for prop in node.metadata_props:
        if prop.key == NAME_SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return ""
            return next((s for s in reversed(scopes) if s in modules), "")
    return _scope_path(node.name, modules)


def _scope_path(name: str, modules: set[str]) -> str:
    """TorchScript's '/inner/model/features/features.0/features.0.0/Conv' as the module 'inner.model.features.0.0'."""
    current = ""
    for seg in [s for s in name.split("/") if s][:-1]:
        last = current.rsplit(".", 1)[-1]
        joined = f"{current}.{seg}" if current else seg
        if joined in modules:
            current = joined
        elif last and seg.startswith(last + ".") and current + seg[len(last):] in modules:
            current = current + seg[len(last):]
    return current


def last_values(model: onnx.ModelProto, modules: set[str]) -> dict[str, tuple[int, str]]:
    """Each layer's last node (its index, its first output), a node counting for every layer that holds it."""
    last: dict[str, tuple[int, str]] = {}
    for index, node in enumerate(model.graph.node):
        layer = node_layer(node, modules)
        while layer and node.output and node.output[0]:
            last[layer] = (index, node.output[0])
            layer = layer.rsplit(".", 1)[0] if "." in layer else ""
    return last


def locate_layer(module: torch.nn.Module, inputs: Sequence[torch.Tensor], target: bytes,
                 feeds: Mapping[str, np.ndarray]) -> Location | None:
    """The first layer whose ONNX value diverges from the module's output (and from the next layers', for a fused
    run), named by its last node; None where no mapped layer diverges."""
    model = onnx.load_from_string(target)
    modules = {name for name, _ in module.named_modules() if name}
    outputs = layer_outputs(module, inputs)
    last = last_values(model, modules)
    wanted = [at for at, o in enumerate(outputs) if o.layer in last]
    values = intermediate_values(model, sorted({last[outputs[at].layer][1] for at in wanted}), feeds)
    before = 0.0
    for at in wanted:
        out = outputs[at]
        index, value = last[out.layer]
        got = values[value]
        if got.shape != out.value.shape:
            continue
        # The next layers whether or not they kept nodes of their own: a folded batch norm keeps none.
        nearby = [judge(got, o.value) for o in outputs[at:at + FUSION_REACH] if o.value.shape == got.shape]
        matched = [m.max_abs for m in nearby if m.ok]
        if matched:
            before = max(before, min(matched))
            continue
        node = model.graph.node[index]
        return Location(node.op_type, node.name, value, index, out.layer, before, nearby[0].max_abs, len(wanted))
    return None
