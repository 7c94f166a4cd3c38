"""Cross-checks of a case: its graph and inputs through the other exporters, ONNX Runtime at each optimization level,
each onnxoptimizer pass alone, or the exporter an ONNX tool started from; each says whether the case's bug shows
there, which tells whose bug it is (the exporter's, the runtime optimizer's, one pass's, or the tool's). Which checks
a case gets is read off its converter's declarations (role, runtime, its capabilities), never its name:
an exporter is checked by every other registered exporter that can express the case's graph, whatever its
framework."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fuzzer.cases.case import CaseData
from fuzzer.cases.diagnosis import (
    AT_LEVEL,
    BEFORE_ORT,
    BEFORE_TOOL,
    OTHER_EXPORTER,
    OTHER_FAILURE,
    PASSES,
    SAME_BUG,
    SKIPPED,
    CrossCheck,
)
from fuzzer.cases.replay import case_expected
from fuzzer.check.pipeline import CheckOptions, check_prepared
from fuzzer.check.result import Expected, Prepared
from fuzzer.converters import CONVERTERS
from fuzzer.converters.at_level import AtLevel
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import RuntimeOptimizer, expresses, pass_names
from fuzzer.converters.ort_levels import LEVELS, OPTIMIZING_LEVELS
from fuzzer.converters.role import Role
from fuzzer.converters.upstream import NATIVE
from fuzzer.support.device import require_device
from oracles.rootcause import error_class
from oracles.verdict import Stage, Symptom, Verdict

CROSS_CHECK = CheckOptions(rerun=False, locate=True, culprit=False)  # locate: the signature names the operator
PASS_GROUP = "{}, each pass alone"
# A case that killed or hung its process would do so again here, in the caller's process.
LOST = (Symptom.PROCESS_DEATH, Symptom.HANG, Symptom.OUT_OF_MEMORY)
DETAIL_CHARS = 100

__all__ = ["CrossCheck", "cross_checks", "deciding_checks", "outcome", "why_not_here"]


@dataclass(frozen=True)
class Planned:
    """One cross-check to run: its name, the converter (registered, or a stand-in) and its options."""

    name: str
    converter: Converter
    options: Mapping[str, Any]
    group: str = ""
    check_options: CheckOptions = CROSS_CHECK


def cross_checks(case: CaseData, converter: Converter | None = None) -> tuple[CrossCheck, ...]:
    """Every cross-check of the case's converter, run on the case's own inputs (its seed's when it has none);
    `converter`: the registry entry the case was found with, when it is not one of CONVERTERS."""
    require_device(case.device, f"{case.id} (found on {case.device})")
    prepared = case_expected(case)
    converter = converter or CONVERTERS.get(case.converter)
    if not isinstance(prepared, Expected) or converter is None:
        return ()  # the source itself fails: nothing converts anywhere
    return tuple(_with_crash_culprit([_run(p, prepared, case.verdict) for p in plan(case, converter)], case,
                                     prepared, converter))


def deciding_checks(case: CaseData, converter: Converter, prepared: Prepared | None = None,
                    own_framework: bool = False) -> tuple[CrossCheck, ...]:
    """The cross-checks that decide whose bug a case is (the model before the tool, the other exporters), and
    none of the many that only narrow it down (each level, each pass alone): cheap enough to run when a signature
    is first filed. `prepared`: the case's source as its test settled it, where the caller still has it;
    `own_framework`: other exporters of the case's framework whose models run on ONNX Runtime only, the libraries a
    worker has loaded already (its process is not confined: a TensorFlow or OpenVINO abort there, or OpenVINO's
    allocations past the worker's memory cap, would be taken for the case converter's death)."""
    prepared = case_expected(case) if prepared is None else prepared
    if not isinstance(prepared, Expected):
        return ()
    deciding = [p for p in plan(case, converter) if p.name in (BEFORE_TOOL, BEFORE_ORT)
                or p.name.endswith(OTHER_EXPORTER.format("").strip())
                and (not own_framework or (p.converter.framework == converter.framework
                                           and p.converter.runtime == "onnxruntime"))]
    return tuple(_run(p, prepared, case.verdict) for p in deciding)


def plan(case: CaseData, converter: Converter) -> list[Planned]:
    """The cross-checks of a case, by its converter (see the module docstring)."""
    options = dict(case.converter_options)
    if converter.role is Role.EXPORTER:
        return list(_exporter_plan(case, converter, options))
    # The exporter an ONNX tool started from, alone; a native model has none (its baseline had a second opinion).
    planned = [] if options.get("upstream") in (None, NATIVE) else [_before_tool(converter, options)]
    if isinstance(converter, RuntimeOptimizer):
        planned += [Planned(AT_LEVEL.format(lv), converter, {**options, converter.level_option: lv},
                            check_options=_culprit_options(case, converter, lv)) for lv in OPTIMIZING_LEVELS]
    if pass_names(converter, converter.options(options)) is not None and len(options.get("passes") or ()) != 1:
        planned += list(_pass_plan(converter, options))
    return planned


def _exporter_plan(case: CaseData, own: Converter, options: dict[str, Any]) -> Iterator[Planned]:
    """Every other exporter that can express the graph (of any framework); for a divergence of a model that runs on
    ONNX Runtime, the same exporter's model run at each ONNX Runtime level."""
    # A dynamic case's other export is dynamic too, checked at the case's own second shape.
    dynamic = {"dynamic": True} if options.get("dynamic") else {}
    for other in CONVERTERS.of_role(Role.EXPORTER):
        if other.name != own.name and expresses(other, case.graph):
            yield Planned(OTHER_EXPORTER.format(other.name), other,
                          _other_options(other, options.get("opset"), dynamic))
    if case.verdict.symptom.is_divergence and own.runtime == "onnxruntime":
        for level in LEVELS:
            yield Planned(AT_LEVEL.format(level), AtLevel(own, level), options)


def _before_tool(converter: Converter, options: dict[str, Any]) -> Planned:
    """The exporter an ONNX tool started from, alone: it passes when the model was right before the tool (for a
    tool that is ONNX Runtime's level, that model at the disabled level)."""
    name = BEFORE_ORT if isinstance(converter, RuntimeOptimizer) else BEFORE_TOOL
    upstream = CONVERTERS[options["upstream"]]
    return Planned(name, upstream, {"opset": _opset_for(upstream, options.get("opset"))})


def _pass_plan(converter: Converter, options: dict[str, Any]) -> Iterator[Planned]:
    """Each pass of the case's set (the converter's default set when empty) alone, as DiTOX runs them."""
    group = PASS_GROUP.format(converter.display_name or converter.name)
    if not converter.availability()[0]:  # no pass list without the library: one check, skipped, says why
        yield Planned(f"{converter.name} passes alone", converter, options, group=group)
        return
    for name in pass_names(converter, converter.options(options)) or ():
        yield Planned(f"{converter.name} pass {name} alone", converter, {**options, "passes": [name]}, group=group)


def _culprit_options(case: CaseData, converter: RuntimeOptimizer, level: str) -> CheckOptions:
    """At the case's own level, let ONNX Runtime's bisection name the optimizer (divergences only)."""
    own = level == case.converter_options.get(converter.level_option)
    return dataclasses.replace(CROSS_CHECK, culprit=True) if own else CROSS_CHECK


def _other_options(other: Converter, opset: Any, dynamic: dict[str, Any]) -> dict[str, Any]:
    """Another exporter's options for a cross-check, of those it has: the case's opset moved into its range (its
    default opset where the case has none, as OpenVINO's PyTorch frontend has none), and `dynamic`."""
    fields = {f.name for f in dataclasses.fields(other.options_type)}
    default = other.options_type().to_json().get("opset")
    chosen = {"opset": _opset_for(other, opset) if isinstance(opset, int) else default} if "opset" in fields else {}
    return {**chosen, **{k: v for k, v in dynamic.items() if k in fields}}


def _opset_for(converter: Converter, opset: Any) -> Any:
    """The case's opset, moved into the range the converter takes (the dynamo exporter starts at 18)."""
    low, high = converter.options_type.opset_range
    return min(max(opset, low), high) if isinstance(opset, int) else opset


def _run(planned: Planned, prepared: Expected, original: Verdict) -> CrossCheck:
    check = CrossCheck(planned.name, "", planned.converter.name, dict(planned.options), planned.group)
    why = why_not_here(planned.converter, planned.options, original)
    if why:
        return dataclasses.replace(check, outcome=SKIPPED + why)
    options = planned.converter.options(planned.options)
    result = check_prepared(prepared, planned.converter, options, planned.check_options)
    return dataclasses.replace(check, outcome=outcome(original, result.verdict), culprit=result.culprit)


def why_not_here(converter: Converter, options: Mapping[str, Any], original: Verdict) -> str:
    """Why `converter` with `options` cannot rerun a case whose verdict is `original` in this process ("" when it
    can): its library is missing, the case's own death or hang would take the process with it, or the options do
    not parse."""
    ok, reason = converter.availability()
    if not ok:
        return _short(reason)
    if original.symptom in LOST and converter.name == original.converter:
        return f"the case's {original.symptom.json_name.replace('_', ' ')} would take this process with it"
    try:
        converter.options(options)
    except (TypeError, ValueError) as exc:
        return _short(str(exc))
    return ""


def outcome(original: Verdict, verdict: Verdict) -> str:
    """SAME_BUG when the verdict has the original's signature, or (another converter) the same divergence on the
    same operator and dtype; PASSES; else OTHER_FAILURE with what happened instead."""
    if verdict.signature and verdict.signature == original.signature:
        return SAME_BUG
    if verdict.symptom is Symptom.PASS:
        return PASSES
    same_divergence = (verdict.symptom is original.symptom and verdict.symptom.is_divergence
                       and (verdict.diverging_op, verdict.diverging_dtype)
                       == (original.diverging_op, original.diverging_dtype))
    # Another converter's model failing alike (the runtime's same error, node names aside) shows the same bug.
    same_error = (verdict.symptom is original.symptom and not verdict.symptom.is_divergence
                  and verdict.stage is original.stage and error_class(verdict.message) == error_class(original.message))
    return SAME_BUG if same_divergence or same_error else OTHER_FAILURE + describe(verdict)


def describe(verdict: Verdict) -> str:
    """'wrong values on floor_divide (int32)', 'crash at node conversion (SymbolicValueError)'."""
    what = verdict.symptom.json_name.replace("_", " ")
    if verdict.diverging_op:
        return f"{what} on {verdict.diverging_op} ({verdict.diverging_dtype})"
    text = f"{what} at {verdict.stage.value.replace('_', ' ')}"
    exc, sep, _ = verdict.message.partition(": ")
    exc = exc.rsplit(".", 1)[-1]
    return text + (f" ({exc})" if sep and exc.isidentifier() else "")


def _with_crash_culprit(checks: list[CrossCheck], case: CaseData, prepared: Expected,
                        converter: Converter) -> list[CrossCheck]:
    """A crash at graph optimization has no run for follow_up's bisection: ONNX Runtime's optimizer bisects the
    crash here, and the culprit goes on the case's own level's check."""
    crashed = case.verdict.symptom is Symptom.CRASH and case.verdict.stage is Stage.GRAPH_OPTIMIZATION
    if not crashed or not isinstance(converter, RuntimeOptimizer):
        return checks
    culprit = converter.bisect_crash(prepared.source, converter.options(case.converter_options))
    key = converter.level_option
    level = case.converter_options.get(key)
    return [dataclasses.replace(c, culprit=culprit) if c.options.get(key) == level and c.outcome == SAME_BUG
            and c.converter == case.converter else c for c in checks]


def _short(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:DETAIL_CHARS]
