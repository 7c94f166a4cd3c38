"""Whose bug a campaign's finding in a zoo model is, decided when it is first filed, from evidence that was run: what
the converter's model computes against what it received (an ONNX tool's baseline) and, for a model ONNX Runtime
runs, what ONNX's checker and reference evaluator make of it, judged at the entry's tolerance as the finding was.

A zoo model has no graph to replay, so the graph cases' cross-checks (fuzzer/diagnosis/crosscheck.py) do not apply;
the rules are blame.py's, read at the architecture's scale."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from fuzzer.cases.diagnosis import Blame
from fuzzer.check.zoo import ZooResult, judge_outputs
from fuzzer.check.zoo_source import ZooSource
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import OwnRuntime, RuntimeOptimizer
from fuzzer.converters.describe import Component, FaultSite
from fuzzer.converters.ort_optimizer import ORT_TRACKER
from fuzzer.converters.runtime import validate
from fuzzer.diagnosis.blame import KERNEL_KEY, RUNTIME_STAGES, runtime_kernel
from oracles.rootcause import UNLOCALIZED, named_operator
from oracles.verdict import Stage, Symptom

# onnx.reference runs operator by operator in numpy: beyond this many nodes an architecture takes it minutes, more
# than a finding's first sighting may spend; the blame then says it was not run.
REFERENCE_MAX_NODES = 400
LINE_CHARS = 160
LOST_WORDS = {Symptom.PROCESS_DEATH: "died", Symptom.HANG: "hung", Symptom.OUT_OF_MEMORY: "ran out of memory"}


def zoo_blame(prepared: ZooSource, converter: Converter, result: ZooResult,
              options: Mapping[str, Any] | None = None) -> Blame:
    """The blame of a zoo finding: the converter's own component unless the evidence shows ONNX Runtime computes
    a right model wrongly; unsettled where the evidence does not decide. `options`: the converter's, as it ran."""
    verdict = result.verdict
    # The operator the error names, where it names one; a divergence of a whole architecture is located by
    # `convsmith check --zoo`, not here.
    operator = named_operator(verdict.message, ()) if not verdict.symptom.is_divergence else None
    own = converter.component(FaultSite(verdict.stage, operator or UNLOCALIZED, labels=verdict.labels,
                                        options=dict(options or {})))
    where = f"on zoo model `{prepared.zoo.entry.name}`"
    if verdict.symptom in (Symptom.PROCESS_DEATH, Symptom.HANG, Symptom.OUT_OF_MEMORY):
        return Blame(own, (f"the process {LOST_WORDS[verdict.symptom]} {where} at {_stage(verdict.stage)}",),
                     settled=verdict.stage is not Stage.NONE)
    if not verdict.symptom.is_divergence:
        return _crash_blame(own, verdict.stage, result.model, where)
    if result.baseline is not None:
        return _tool_blame(prepared, converter, own, result)
    if isinstance(converter, OwnRuntime) or result.model is None:
        return Blame(own, (f"its target computes wrong outputs {where} (judged at the entry's tolerance against "
                           "PyTorch, and far from PyTorch's float64 run), and no ONNX model of it was examined: "
                           "the converter's translation and its runtime are not told apart",), settled=False)
    return _exporter_blame(prepared, own, result)


def _crash_blame(own: Component, stage: Stage, model: bytes | None, where: str) -> Blame:
    """A converter that fails: its own step's where the stage is its own; a model the runtime rejects is the
    converter's where ONNX's checker rejects it too, else unsettled."""
    if stage not in (*RUNTIME_STAGES, Stage.VALIDATION):
        return Blame(own, (f"it fails inside the converter {where}, at {_stage(stage)}: {own.name}",), settled=True)
    if model is None:
        return Blame(own, (f"the converted model fails at {_stage(stage)} {where}; it was not kept to examine",),
                     settled=False)
    checker = _first_error(lambda: validate(onnx.load_from_string(model)))
    if checker:
        return Blame(own, (f"ONNX's checker and strict shape inference reject the converted model: {checker}",
                           "so the converter wrote a model ONNX's own checker rejects"), settled=True)
    return Blame(own, ("ONNX's checker and strict shape inference accept the converted model, and the runtime "
                       f"fails on it at {_stage(stage)}: whether the model breaks a constraint the checker misses or "
                       "the runtime is wrong is not settled",), settled=False)


def _tool_blame(prepared: ZooSource, converter: Converter, own: Component, result: ZooResult) -> Blame:
    """An ONNX tool's model computes otherwise than the model it received, which PyTorch's float64 run sides with:
    the tool changed what the model computes, unless the reference evaluator finds its model right."""
    name = prepared.zoo.entry.name
    lines = [f"{converter.name}'s model computes outputs that differ from those of the model it received (both "
             f"run as the campaign runs them), and PyTorch's float64 run of `{name}` sides with the model it received"]
    if isinstance(converter, (RuntimeOptimizer, OwnRuntime)) or result.model is None:
        return Blame(own, (*lines, "so the conversion changed what the model computes"), settled=True)
    opinion, note = _reference(prepared, result.model, result.baseline or (), result.computed_in)
    lines.append(f"onnx.reference on {converter.name}'s model: {note}")
    if opinion == "agrees":
        kernel = _kernel(prepared, result.model)
        return Blame(kernel, (*lines, "so the tool's model is right and ONNX Runtime computes it wrongly"),
                     settled=True, shared=True)
    return Blame(own, (*lines, "so the tool's model itself computes otherwise"), settled=opinion == "wrong")


def _exporter_blame(prepared: ZooSource, own: Component, result: ZooResult) -> Blame:
    """An exported model ONNX Runtime computes wrongly: the exporter's where onnx.reference computes it as wrongly,
    the runtime's kernels' where onnx.reference computes it right."""
    assert result.model is not None
    lines = [f"ONNX Runtime's outputs of the exported `{prepared.zoo.entry.name}` differ from PyTorch's beyond the "
             "entry's tolerance and far from PyTorch's float64 run"]
    checker = _first_error(lambda: validate(onnx.load_from_string(result.model or b"")))
    lines.append("ONNX's checker and strict shape inference " + (f"reject it: {checker}" if checker else
                                                                "accept it"))
    opinion, note = _reference(prepared, result.model, prepared.eager, result.computed_in)
    lines.append(f"onnx.reference on the exported model: {note}")
    if opinion == "agrees" and not checker:
        return Blame(_kernel(prepared, result.model), (*lines, "so the model is right and ONNX Runtime computes it "
                                                       "wrongly"), settled=True, shared=True)
    if opinion == "wrong" or checker:
        return Blame(own, (*lines, "so the exported model itself computes the wrong outputs"), settled=True)
    return Blame(own, (*lines, "the evidence does not settle whose it is: filed with the exporter"), settled=False)


def _reference(prepared: ZooSource, model: bytes, wanted: Sequence[np.ndarray],
               computed_in: Mapping[str, str]) -> tuple[str, str]:
    """onnx.reference's opinion of `model` against `wanted` at the entry's tolerance: 'agrees', 'wrong' (it
    computes wrong outputs too), 'failed' or 'not run', with a line saying so."""
    from onnx.reference import ReferenceEvaluator

    proto = onnx.load_from_string(model)
    if len(proto.graph.node) > REFERENCE_MAX_NODES:
        return "not run", f"not run ({len(proto.graph.node)} nodes, over {REFERENCE_MAX_NODES})"
    wanted_inputs = {i.name for i in proto.graph.input}
    feeds = {spec.name: np.asarray(x) for spec, x in zip(prepared.zoo.entry.inputs, prepared.zoo.inputs)}
    try:
        outputs = ReferenceEvaluator(proto).run(None, {n: v for n, v in feeds.items() if n in wanted_inputs})
    except Exception as exc:  # the evaluator's own gaps as much as a broken model: evidence, never a verdict
        return "failed", f"it cannot run the model: {_line(f'{type(exc).__name__}: {exc}')}"
    outputs = [np.asarray(x, dtype=np.float32) if np.asarray(x).dtype.name == "bfloat16" else np.asarray(x)
               for x in outputs]
    if len(outputs) != len(wanted):
        return "failed", f"it gives {len(outputs)} outputs where {len(wanted)} are wanted"
    judged = judge_outputs(prepared, outputs, wanted, computed_in)
    if not judged.failing:
        return "agrees", "it computes the right outputs (within the entry's tolerance)"
    first = judged.metrics[judged.failing[0]]
    return "wrong", f"it computes wrong outputs too ({first.reason.value}, max_abs={first.max_abs:.3g})"


def _kernel(prepared: ZooSource, model: bytes) -> Component:
    """ONNX Runtime's kernels of the model, named by its operator types (a zoo finding is not located to one)."""
    ops = sorted({n.op_type for n in onnx.load_from_string(model).graph.node})
    if len(ops) == 1:
        return runtime_kernel(ops[0], "cpu")
    return Component("ONNX Runtime", f"a CPU kernel of one of the {len(ops)} operator types of zoo model "
                     f"`{prepared.zoo.entry.name}` (not located to one)", ORT_TRACKER, KERNEL_KEY, "onnxruntime")


def _first_error(run: Callable[[], object]) -> str:
    try:
        run()
    except Exception as exc:  # what the checker or shape inference raises, whatever its type
        return _line(f"{type(exc).__name__}: {exc}")
    return ""


def _stage(stage: Stage) -> str:
    return stage.value.replace("_", " ")


def _line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:LINE_CHARS]
