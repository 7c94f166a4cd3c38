"""An exporter's wrong model, against the PyTorch module it came from: the first wrong layer (layers.py), the
constants its nodes read matched with the layer's parameters in whatever form the exporter gave them (weights.py: a
batch norm folded into its convolution, as TorchScript's export does), those that differ restored, and the repaired
model re-verified against eager PyTorch on fresh inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import torch

from fuzzer.modelcheck.diagnose import Finding
from fuzzer.modelcheck.layers import locate_layer, node_layer
from fuzzer.modelcheck.locate import Location
from fuzzer.modelcheck.repair import Repair, Round, edited_and_verified
from fuzzer.modelcheck.runs import judge_all, run_onnx
from fuzzer.modelcheck.weights import fold_batch_norm, weight_findings


def eager(module: torch.nn.Module, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    with torch.no_grad():
        return tuple(o.detach().cpu().numpy() for o in module(*(torch.from_numpy(np.array(x)) for x in inputs)))


def passes_eager(module: torch.nn.Module, target: bytes, feeds: Mapping[str, np.ndarray]) -> bool:
    """Whether the ONNX model runs and agrees with the module on the same inputs (fed in order)."""
    try:
        actual = run_onnx(target, feeds)
    except Exception:  # ONNX Runtime refused or failed on the candidate: it is not a repair
        return False
    expected = eager(module, list(feeds.values()))
    return len(actual) == len(expected) and all(m.ok for m in judge_all(actual, expected))


def parameter_findings(module: torch.nn.Module, target: onnx.ModelProto, where: Location) -> list[Finding]:
    """The constants read by the nodes of the located layer that are mostly, in some layout, a parameter or buffer
    of that layer's modules, or a convolution's weight with the batch norm after it folded in (the TorchScript
    exporter folds them and names the result after neither), and differ from it."""
    modules = {name for name, _ in module.named_modules() if name}
    inside = [n for n in target.graph.node if _within(node_layer(n, modules), where.layer)]
    names = [i for n in inside for i in n.input]
    return weight_findings(target, names, module_weights(module, where.layer), where.output,
                           where.layer)


def _within(layer: str, outer: str) -> bool:
    return layer == outer or layer.startswith(outer + ".")


def module_weights(module: torch.nn.Module, layer: str) -> list[np.ndarray]:
    """Every parameter and buffer of the layer's modules, and each convolution's weight and bias with the batch norm
    that follows it (in module order) folded in, where either of the two is in the layer (a bare convolution's batch
    norm is its sibling)."""
    found = [v.detach().cpu().numpy() for v in module.get_submodule(layer).state_dict().values()
             if v.is_floating_point()]
    named = list(module.named_modules())
    for (conv_name, conv), (bn_name, bn) in zip(named, named[1:]):
        pair = isinstance(conv, torch.nn.modules.conv._ConvNd) and isinstance(bn, torch.nn.modules.batchnorm._BatchNorm)
        if not (pair and bn.running_mean is not None and (_within(conv_name, layer) or _within(bn_name, layer))):
            continue
        channels = bn.num_features
        gamma = bn.weight.detach().numpy() if bn.weight is not None else np.ones(channels)
        beta = bn.bias.detach().numpy() if bn.bias is not None else np.zeros(channels)
        bias = None if conv.bias is None else conv.bias.detach().numpy()
        found += fold_batch_norm(conv.weight.detach().numpy(), bias, gamma, beta, bn.running_mean.numpy(),
                                 bn.running_var.numpy(), bn.eps, out_axis=0)
    return found


def repair_export(module: torch.nn.Module, target: bytes, feeds: Mapping[str, np.ndarray],
                  fresh: Mapping[str, np.ndarray]) -> Repair:
    """One round: locate the layer, restore the parameters its node reads; repaired only when the model then agrees
    with the module on the inputs and on fresh ones."""
    inputs = [torch.from_numpy(np.array(x)) for x in feeds.values()]
    where = locate_layer(module, inputs, target, feeds)
    if where is None:
        return Repair((Round(None, ()),), None, False, "no mapped layer diverges")
    findings = parameter_findings(module, onnx.load_from_string(target), where)
    rounds = (Round(where, tuple(findings)),)
    if not findings:
        return Repair(rounds, None, False, "no parameter of the located node differs from the module's")
    return edited_and_verified(rounds, target, findings, lambda model, inputs: passes_eager(module, model, inputs),
                               feeds, fresh)
