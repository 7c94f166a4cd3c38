"""Whose bug a finding on a whole model is (a zoo architecture, or a cut of one), decided from evidence that was run:
what the converter's model computes against what it should (the source's outputs, or for an ONNX tool the model it
received), and, for a model ONNX Runtime runs, what ONNX's checker and reference evaluator make of it.

Such a finding has no convsmith graph to replay, so the graph cases' cross-checks (crosscheck.py) do not apply; the
rules are blame.py's, read at a model's scale."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fuzzer.cases.diagnosis import Blame
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import OwnRuntime, RuntimeOptimizer
from fuzzer.converters.describe import Component, FaultSite
from fuzzer.converters.ort_optimizer import ORT_TRACKER
from fuzzer.converters.runtime import validate
from fuzzer.diagnosis.blame import KERNEL_KEY, RUNTIME_STAGES, runtime_kernel
from fuzzer.diagnosis.evidence import first_error, first_line
from oracles.rootcause import UNLOCALIZED, named_operator
from oracles.verdict import Stage, Symptom, Verdict

# onnx.reference runs operator by operator in numpy: beyond this many nodes an architecture takes it minutes, more
# than a finding's first sighting may spend; the blame then says it was not run.
REFERENCE_MAX_NODES = 400
LOST_WORDS = {Symptom.PROCESS_DEATH: "died", Symptom.HANG: "hung", Symptom.OUT_OF_MEMORY: "ran out of memory"}
# Outputs against what they should be: the index of the first that is wrong beyond tolerance and a few words on
# how, or None where all agree.
Judge = Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], tuple[int, str] | None]


@dataclass(frozen=True)
class WholeModel:
    """What a finding on a whole model is examined with."""

    where: str  # "on zoo model `gru`", "on a cut of 3 ONNX nodes of zoo model `t5`"
    feeds: Mapping[str, np.ndarray]  # the inputs, by name
    wanted: Sequence[np.ndarray]  # what a right target computes
    judge: Judge
    received: bool  # `wanted` is what the model an ONNX tool received computes, not the source's own outputs
    named_ops: str = "the model"  # how a kernel blame names the model whose operators it could not separate


def model_blame(converter: Converter, verdict: Verdict, model: bytes | None, whole: WholeModel,
                options: Mapping[str, Any] | None = None) -> Blame:
    """The converter's own component unless the evidence shows ONNX Runtime computes a right model wrongly;
    unsettled where the evidence does not decide. `model`: the converter's ONNX model, where there is one."""
    # The operator the error names, where it names one; a wrong output of a whole model is not located here.
    operator = named_operator(verdict.message, ()) if not verdict.symptom.is_divergence else None
    own = converter.component(FaultSite(verdict.stage, operator or UNLOCALIZED, labels=verdict.labels,
                                        options=dict(options or {})))
    if verdict.symptom in LOST_WORDS:
        return Blame(own, (f"the process {LOST_WORDS[verdict.symptom]} {whole.where} at {_stage(verdict.stage)}",),
                     settled=verdict.stage is not Stage.NONE)
    if not verdict.symptom.is_divergence:
        return _crash_blame(own, verdict.stage, model, whole.where)
    if whole.received:
        return _tool_blame(converter, own, model, whole)
    if isinstance(converter, OwnRuntime) or model is None:
        return Blame(own, (f"its target computes wrong outputs {whole.where}, and no ONNX model of it was examined: "
                           "the converter's translation and its runtime are not told apart",), settled=False)
    return _exporter_blame(own, model, whole)


def _crash_blame(own: Component, stage: Stage, model: bytes | None, where: str) -> Blame:
    """A converter that fails: its own step's where the stage is its own; a model the runtime rejects is the
    converter's where ONNX's checker rejects it too, else unsettled."""
    if stage not in (*RUNTIME_STAGES, Stage.VALIDATION):
        return Blame(own, (f"it fails inside the converter {where}, at {_stage(stage)}: {own.name}",), settled=True)
    if model is None:
        return Blame(own, (f"the converted model fails at {_stage(stage)} {where}; it was not kept to examine",),
                     settled=False)
    checker = first_error(lambda: validate(onnx.load_from_string(model)))
    if checker:
        return Blame(own, (f"ONNX's checker and strict shape inference reject the converted model: {checker}",
                           "so the converter wrote a model ONNX's own checker rejects"), settled=True)
    return Blame(own, ("ONNX's checker and strict shape inference accept the converted model, and the runtime "
                       f"fails on it at {_stage(stage)}: whether the model breaks a constraint the checker misses or "
                       "the runtime is wrong is not settled",), settled=False)


def _tool_blame(converter: Converter, own: Component, model: bytes | None, whole: WholeModel) -> Blame:
    """An ONNX tool's model computes otherwise than the model it received: the tool changed what the model
    computes, unless the reference evaluator finds its model right."""
    lines = [f"{converter.name}'s model computes outputs that differ from those of the model it received {whole.where} "
             "(both run as the campaign runs them)"]
    if isinstance(converter, (RuntimeOptimizer, OwnRuntime)) or model is None:
        return Blame(own, (*lines, "so the conversion changed what the model computes"), settled=True)
    opinion, note = _reference(model, whole)
    lines.append(f"onnx.reference on {converter.name}'s model: {note}")
    if opinion == "agrees":
        return Blame(_kernel(model, whole), (*lines, "so the tool's model is right and ONNX Runtime computes it "
                                             "wrongly"), settled=True, shared=True)
    return Blame(own, (*lines, "so the tool's model itself computes otherwise"), settled=opinion == "wrong")


def _exporter_blame(own: Component, model: bytes, whole: WholeModel) -> Blame:
    """An exported model ONNX Runtime computes wrongly: the exporter's where onnx.reference computes it as wrongly,
    the runtime's kernels' where onnx.reference computes it right."""
    lines = [f"ONNX Runtime's outputs of the exported model differ from the source's beyond tolerance {whole.where}"]
    checker = first_error(lambda: validate(onnx.load_from_string(model)))
    lines.append("ONNX's checker and strict shape inference " + (f"reject it: {checker}" if checker else
                                                                "accept it"))
    opinion, note = _reference(model, whole)
    lines.append(f"onnx.reference on the exported model: {note}")
    if opinion == "agrees" and not checker:
        return Blame(_kernel(model, whole), (*lines, "so the model is right and ONNX Runtime computes it wrongly"),
                     settled=True, shared=True)
    if opinion == "wrong" or checker:
        return Blame(own, (*lines, "so the exported model itself computes the wrong outputs"), settled=True)
    return Blame(own, (*lines, "the evidence does not settle whose it is: filed with the exporter"), settled=False)


def _reference(model: bytes, whole: WholeModel) -> tuple[str, str]:
    """onnx.reference's opinion of `model` against what it should compute: 'agrees', 'wrong' (it computes wrong
    outputs too), 'failed' or 'not run', with a line saying so."""
    from onnx.reference import ReferenceEvaluator

    proto = onnx.load_from_string(model)
    if len(proto.graph.node) > REFERENCE_MAX_NODES:
        return "not run", f"not run ({len(proto.graph.node)} nodes, over {REFERENCE_MAX_NODES})"
    wanted_inputs = {i.name for i in proto.graph.input}
    try:
        outputs = ReferenceEvaluator(proto).run(None, {n: v for n, v in whole.feeds.items() if n in wanted_inputs})
    except Exception as exc:  # the evaluator's own gaps as much as a broken model: evidence, never a verdict
        return "failed", f"it cannot run the model: {first_line(f'{type(exc).__name__}: {exc}')}"
    outputs = [np.asarray(x, dtype=np.float32) if np.asarray(x).dtype.name == "bfloat16" else np.asarray(x)
               for x in outputs]
    if len(outputs) != len(whole.wanted):
        return "failed", f"it gives {len(outputs)} outputs where {len(whole.wanted)} are wanted"
    wrong = whole.judge(outputs, whole.wanted)
    if wrong is None:
        return "agrees", "it computes the right outputs (within tolerance)"
    return "wrong", f"it computes wrong outputs too ({wrong[1]})"


def _kernel(model: bytes, whole: WholeModel) -> Component:
    """ONNX Runtime's kernels of the model, named by its operator types where it has one (a whole model's failure is
    not located to one node here)."""
    ops = sorted({n.op_type for n in onnx.load_from_string(model).graph.node})
    if len(ops) == 1:
        return runtime_kernel(ops[0], "cpu")
    return Component("ONNX Runtime", f"a CPU kernel of one of the {len(ops)} operator types of {whole.named_ops} "
                     "(not located to one)", ORT_TRACKER, KERNEL_KEY, "onnxruntime")


def _stage(stage: Stage) -> str:
    return stage.value.replace("_", " ")
