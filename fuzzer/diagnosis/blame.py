"""Whose bug a case is: the project and component that must change, decided from evidence that was run (the
cross-checks, and the converted model under ONNX's checker, ONNX Runtime and onnx.reference), never from the
converter's name alone. Where the evidence does not settle it, the blame says so and lists what is known.

A runtime kernel that computes (or rejects) a valid model wrongly is ONNX Runtime's, whichever converter made the
model: such a blame is `shared`, and root causes are keyed by it so that every route to it is filed once."""

from __future__ import annotations

from collections.abc import Mapping

import onnx

from fuzzer.cases.case import CaseData
from fuzzer.cases.diagnosis import (
    BEFORE_ORT,
    BEFORE_TOOL,
    OTHER_EXPORTER,
    OTHER_FAILURE,
    SAME_BUG,
    Blame,
)
from fuzzer.cases.fault_site import fault_site
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import RuntimeOptimizer
from fuzzer.converters.describe import Component, FaultSite
from fuzzer.converters.ort_optimizer import ORT_TRACKER
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import validate
from fuzzer.diagnosis.evidence import ModelEvidence, Opinion
from oracles.rootcause import named_operator
from oracles.verdict import Stage, Symptom

KERNEL_KEY = "onnxruntime-kernel"  # the root-cause owner of every ONNX Runtime kernel defect, whatever the route
RUNTIME_STAGES = (Stage.RUNTIME_LOAD, Stage.RUNTIME_EXECUTION)


def runtime_kernel(operator: str, device: str) -> Component:
    """ONNX Runtime's kernel of an ONNX operator on the case's execution provider."""
    provider = "CUDA" if device == "cuda" else "CPU"
    return Component("ONNX Runtime", f"{provider} kernel of `{operator}`", ORT_TRACKER, KERNEL_KEY, "onnxruntime")


def blame_case(case: CaseData, model: ModelEvidence | None, converter: Converter | None = None) -> Blame:
    """The blame of a diagnosed case (its cross-checks filled in) given what its converted model does elsewhere."""
    converter = converter or CONVERTERS.get(case.converter)
    site = fault_site(case)
    if converter is None:
        own = Component(case.converter, case.converter, "", case.converter)
    else:
        own = converter.component(site)
    checks = {c.name: c.outcome for c in case.cross_checks or ()}
    before = checks.get(BEFORE_TOOL) or checks.get(BEFORE_ORT)
    upstream = CONVERTERS.get(str(case.converter_options.get("upstream")))
    failed_otherwise = before is not None and before.startswith(OTHER_FAILURE)
    rejected = upstream_rejected(case) if upstream is not None and failed_otherwise else ""
    if upstream is not None and (before == SAME_BUG or rejected):
        return _before_the_tool(before, upstream, site, case, rejected)
    evidence = list(_cross_check_lines(checks))
    if converter is not None:  # what its own checks found, as the verdict's labels carry it (OpenVINO's evaluation)
        evidence += converter.label_evidence(case.verdict.labels)
    if failed_otherwise:
        evidence.append(f"the model {case.converter} received fails otherwise on its own ({before}): that is not "
                        f"the failure filed here")
    verdict = case.verdict
    if verdict.symptom in (Symptom.PROCESS_DEATH, Symptom.HANG, Symptom.OUT_OF_MEMORY):
        return Blame(own, tuple(evidence + _plain_reading(verdict.stage, own)), settled=verdict.stage is not Stage.NONE)
    if model is None:
        settled = verdict.stage not in (*RUNTIME_STAGES, Stage.VALIDATION) and not verdict.symptom.is_divergence
        reading = _plain_reading(verdict.stage, own) if settled else ["no converted model was kept to examine"]
        return Blame(own, tuple(evidence + reading), settled=settled)
    evidence += model_lines(model)
    if case.suggested_fix is not None:
        evidence.append(f"an edit of the converted model makes the outputs agree: {case.suggested_fix.edit}")
    kernel = runtime_kernel(_kernel_operator(case, model), case.device)
    corroborated = any(name.endswith(OTHER_EXPORTER.format("").strip()) and outcome == SAME_BUG
                       for name, outcome in checks.items())
    blame = decide(own, kernel, verdict.symptom, verdict.stage, model, tuple(evidence),
                   is_runtime_optimizer=isinstance(converter, RuntimeOptimizer), corroborated=corroborated)
    sibling = same_bug_sibling(case, own)
    if blame.settled or blame.shared or sibling is None:
        return blame
    return Blame(siblings_component(own, sibling, site.operator), blame.evidence + (
        f"{sibling} of the same project gives the same wrong result: one defect of the export of the operator (or of "
        "what both exports reach), filed once for both",), settled=False, shared=True)


def same_bug_sibling(case: CaseData, own: Component) -> str | None:
    """Another exporter of the same project (its code in the same distribution) that shows the same bug on the graph;
    None where none does."""
    for check in case.cross_checks or ():
        other = CONVERTERS.get(check.converter)
        if check.outcome == SAME_BUG and other is not None and other.role is Role.EXPORTER \
                and other.name != case.converter:
            found = other.component(FaultSite(case.verdict.stage, ""))
            if found.distribution and found.distribution == own.distribution:
                return other.name
    return None


def siblings_component(own: Component, sibling: str, operator: str) -> Component:
    """The export of `operator` by both exporters of a project: one component, keyed the same from either side."""
    key = "+".join(sorted((own.key, sibling)))
    return Component(own.project, f"its exporters' export of `{operator}` ({' and '.join(sorted((own.key, sibling)))} "
                     "alike)", own.tracker, key, own.distribution)


def decide(own: Component, kernel: Component, symptom: Symptom, stage: Stage, model: ModelEvidence,
           evidence: tuple[str, ...], is_runtime_optimizer: bool = False, corroborated: bool = False) -> Blame:
    """The rules, in order: a valid model that onnx.reference computes right but ONNX Runtime (optimizations off)
    computes wrongly is the runtime kernel's; one it rejects is too, where another converter's model of the graph is
    rejected alike (`corroborated`: onnx.reference checks less of the spec than a runtime, so its running a model is
    no proof the model is valid); a model onnx.reference computes as wrongly, or ONNX's checker rejects, is the
    converter's; anything else stays with the converter, unsettled."""
    rejected = stage in RUNTIME_STAGES and symptom in (Symptom.CRASH, Symptom.INVALID_MODEL)
    miscomputed = symptom.is_divergence and not model.runtime_agrees and not model.runtime
    if is_runtime_optimizer:  # its optimized model is ONNX Runtime's own: the converter is the runtime already
        return Blame(own, evidence, settled=True)
    if model.valid and model.reference is Opinion.AGREES and (miscomputed or (rejected and corroborated)):
        return Blame(kernel, evidence + ("so the model is right and ONNX Runtime computes it wrongly",), True, True)
    if rejected and model.valid and model.reference is Opinion.AGREES:
        note = ("onnx.reference runs the model, but it checks less of the operator's definition than a runtime, and "
                "no other converter's model is rejected alike: the model may break a constraint ONNX's checker "
                "misses")
        return Blame(own, evidence + (note,), False)
    if symptom.is_divergence and model.reference is Opinion.WRONG_LIKE_RUNTIME:
        return Blame(own, evidence + ("so the converted model itself computes the wrong outputs",), True)
    if stage is Stage.VALIDATION and model.reference is Opinion.AGREES and model.runtime_agrees:
        note = ("ONNX Runtime and onnx.reference both run it and agree with PyTorch: if the model is valid as "
                "written, ONNX's checker or shape inference is wrong instead")
        return Blame(own, evidence + (note,), False)
    if not model.valid and stage in (Stage.VALIDATION, *RUNTIME_STAGES):
        return Blame(own, evidence + ("so the converter wrote a model ONNX's own checker rejects",), True)
    if stage not in (*RUNTIME_STAGES, Stage.VALIDATION) and not symptom.is_divergence:
        return Blame(own, evidence + tuple(_plain_reading(stage, own)), True)
    return Blame(own, evidence + ("the evidence does not settle whose it is: filed with the converter",), False)


def model_lines(model: ModelEvidence) -> list[str]:
    """The model's examination as evidence lines."""
    verdict = "accept the model" if model.valid else f"reject it: {model.checker}"
    lines = [f"ONNX's checker and strict shape inference {verdict}"]
    if model.runtime:
        lines.append(f"ONNX Runtime (optimizations off) fails on it: {model.runtime}")
    else:
        lines.append(f"ONNX Runtime (optimizations off) {'agrees' if model.runtime_agrees else 'disagrees'} with "
                     "PyTorch")
    note = f": {model.reference_note}" if model.reference_note else ""
    lines.append(f"onnx.reference (ONNX's reference evaluator) {model.reference.value}{note}")
    return lines


def _cross_check_lines(checks: Mapping[str, str]) -> list[str]:
    """The cross-checks that bear on blame, one line each."""
    lines = []
    for name, outcome in checks.items():
        if name.endswith(OTHER_EXPORTER.format("").strip()) or name in (BEFORE_TOOL, BEFORE_ORT):
            lines.append(f"{name}: {outcome}")
    return lines


def _plain_reading(stage: Stage, own: Component) -> list[str]:
    if stage is Stage.NONE:
        return ["the process died where its stack names no step of the converter: filed with the converter"]
    return [f"it fails inside the converter, at {stage.value.replace('_', ' ')}: {own.name}"]


def upstream_rejected(case: CaseData) -> str:
    """ONNX's checker's (full, strict shape inference) first error on the model the tool received; "" when it
    accepts it or there is none."""
    if case.upstream_model is None:
        return ""
    try:
        validate(onnx.load_from_string(case.upstream_model))
    except Exception as exc:  # whatever the checker or shape inference raises: the model is rejected
        return (f"{type(exc).__name__}: {exc}".strip().splitlines() or [""])[0][:160]
    return ""


def _before_the_tool(before: str, upstream: Converter, site: FaultSite, case: CaseData, rejected: str) -> Blame:
    """A model that was wrong before the tool received it (the same failure, or one ONNX's checker rejects, as
    `rejected` says): the exporter that made it is at fault. A tool's failure on a valid model is never this."""
    component = upstream.component(FaultSite(Stage.NODE_CONVERSION, site.operator))
    lines = [f"the exporter's model alone, before {case.converter}: {before}"]
    if rejected:
        lines.append(f"ONNX's checker rejects the model {case.converter} received ({rejected}): the tool was handed "
                     "an invalid model")
    return Blame(component, tuple(lines), settled=True)


def _kernel_operator(case: CaseData, model: ModelEvidence) -> str:
    """The ONNX operator a runtime failure names, else the model's only computing operator, else its operators."""
    named = named_operator(case.verdict.message, ())
    if named and named[0].isupper():
        return named
    if len(model.op_types) == 1:
        return model.op_types[0]
    return ", ".join(model.op_types) or "unknown"


__all__ = ["Blame", "blame_case", "decide", "runtime_kernel"]
