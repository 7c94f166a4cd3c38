"""An exporter's wrong model, against the PyTorch module it came from: the first wrong layer (layers.py), the
parameters its last node reads that differ from the module's same-named ones (the dynamo exporter names initializers
by their module path), restored, and the repaired model re-verified against eager PyTorch on fresh inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from fuzzer.modelcheck.diagnose import FaultKind, Finding, constant_difference
from fuzzer.modelcheck.edits import RestoreConstant
from fuzzer.modelcheck.layers import locate_layer
from fuzzer.modelcheck.locate import Location
from fuzzer.modelcheck.repair import Repair, Round
from fuzzer.modelcheck.runs import judge_all, run_onnx


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
    """The located node's initializers that differ from the same-named parameters or buffers of the module the node
    comes from."""
    state = {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}
    inits = {t.name: t for t in target.graph.initializer}
    found = []
    for name in target.graph.node[where.index].input:
        # A parameter of another layer than the node's was folded into it (a batch norm into the convolution
        # before it): it differs from the module's by design, and the module's would not restore it.
        if name not in inits or name not in state or name.rsplit(".", 1)[0] != where.layer:
            continue
        detail = constant_difference(name, state[name], numpy_helper.to_array(inits[name]))
        if detail:
            tensor = numpy_helper.from_array(state[name], name).SerializeToString()
            found.append(Finding(FaultKind.PARAMETER, detail, RestoreConstant(name, tensor), where.output))
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
    edited = onnx.load_from_string(target)
    for finding in findings:
        edited = finding.edit.apply(edited)
    model = edited.SerializeToString()
    if not passes_eager(module, model, feeds):
        return Repair(rounds, model, False, "the edited model still fails the oracle")
    if not passes_eager(module, model, fresh):
        return Repair(rounds, model, False, "the edited model fails the oracle on fresh inputs")
    return Repair(rounds, model, True, "passes the oracle on the inputs and on fresh inputs")
