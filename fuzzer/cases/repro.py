"""repro.py for a case folder: plain PyTorch source of the graph, the same converter call, a comparison, an exit code.

The module is rendered from the graph, one line of torch code per node, each written by the operator's own
`torch_source` (tests/test_op_registry.py checks every operator's source against its forward, bit for bit).
The rest of the script is real Python, fuzzer/cases/harness/, copied by fuzzer/cases/assembly.py: the definitions
the case's converter needs, the case's values in place of the placeholders. The script needs torch, onnx,
onnxruntime and numpy (plus the ONNX optimizer under test, if any), never convsmith.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fuzzer.cases.assembly import Module, assemble, harness
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import TORCH_HARNESS, UPSTREAM_HARNESS, Converter
from fuzzer.converters.capabilities import snippet_of
from fuzzer.converters.native import NATIVE
from fuzzer.converters.ort_levels import ORT_LEVEL_MEMBERS
from fuzzer.converters.role import Role
from fuzzer.support.confine import DEFAULT_MEMORY_MB
from fuzzer.support.faults import hang_seconds
from generators.ir import Graph
from generators.torch_source import identifier, render_module
from oracles.compare import DEFAULT_TOLERANCES
from oracles.rootcause import exception_name
from oracles.verdict import Symptom

# ---- the script ------------------------------------------------------------------------------------------------

_HARNESS_LIBS = ("torch", "onnx", "onnxruntime", "numpy")  # the usual harness's libraries, in the order named
_LIBS_MARK = "<libraries>"
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.MULTILINE)
LOST_CHILD_TIMEOUT_S = 600  # a death case's child that neither dies nor ends by then fails otherwise
# The harness modules of the two usual kinds of repro.py, head first, read once: a campaign renders what it started
# with. A converter that declares other modules (Converter.source_harness) has them read on first use.
TORCH_SCRIPT = harness(TORCH_HARNESS)
UPSTREAM_SCRIPT = harness(UPSTREAM_HARNESS)
UPSTREAM_AS_SAVED = "upstream_as_saved"  # the native model, remade from the saved upstream.onnx


def render_transform(case: Any, converter: Converter | None = None) -> str:
    """`transform(model)`: the ONNX-to-ONNX converter's own call (its `snippet`, as report.md writes it too)."""
    converter = converter or CONVERTERS.get(case.converter)
    call = snippet_of(converter, converter.options(case.converter_options)) if converter else None
    if call is None or call.from_torch:
        body = [f"print('repro.py: cannot run: it has no call of {case.converter}', file=sys.stderr)",
                "raise SystemExit(3)"]
    else:  # the ORT optimizer's call is the session's level: its model goes through unchanged
        body = [*call.imports, *call.lines, "return model"]
    lines = ["def transform(model):", '    """The ONNX-to-ONNX converter under test."""']
    return "\n".join(lines + [f"    {line}" for line in body]) + "\n"


def render_export(case: Any, converter: Converter | None) -> str:
    """`export(module, inputs)`: the exporter's own call as its snippet writes it (for Converter.repro_conversion
    "export_and_run_snippet")."""
    call = snippet_of(converter, converter.options(case.converter_options)) if converter else None
    body = ([*call.imports, *call.lines, "return model"] if call is not None and call.from_torch else
            [f"print('repro.py: cannot run: it has no call of {case.converter}', file=sys.stderr)",
             "raise SystemExit(3)"])
    lines = ["def export(module, inputs):", '    """The exporter under test, as its report snippet calls it."""']
    return "\n".join(lines + [f"    {line}" for line in body]) + "\n"


def expected_error(message: str) -> str:
    """'onnx.onnx_cpp2py_export.shape_inference.InferenceError: ...' -> 'InferenceError'."""
    return exception_name(message)


def child_timeout_s(verdict: Any) -> float:
    """How long a lost case's repro.py waits for its converting child: a hang's own timeout, else a long while."""
    found = hang_seconds(verdict.message) if verdict.symptom.json_name == "hang" else None
    return found if found is not None else LOST_CHILD_TIMEOUT_S


def case_values(case: Any) -> dict[str, str]:
    """The source of each case constant of repro.py (the placeholders of fuzzer/cases/harness/head.py)."""
    graph: Graph = case.graph
    verdict = case.verdict
    values = {
        "CASE": case.id, "SYMPTOM": verdict.symptom.json_name, "EXPECTED_ERROR": expected_error(verdict.message),
        "CONVERTER": case.converter, "OPTIONS": dict(sorted(case.converter_options.items())),
        "INPUT_NAMES": tuple(graph.inputs), "OUTPUT_NAMES": tuple(graph.outputs),
        "OUTPUT_DTYPES": tuple(graph.types[o].dtype.value for o in graph.outputs),
        "TOLERANCES": {k: (v.rtol, v.atol) for k, v in DEFAULT_TOLERANCES.items()}, "DEVICE": case.device,
        "DYNAMIC": case.dynamic if case.dynamic is None else dict(case.dynamic),
        "SECOND_SHAPE": bool(case.second_inputs), "DIVERGENCES": Symptom.json_names(Symptom.divergences()),
        "LOST": Symptom.json_names(Symptom.lost_worker()), "CHILD_TIMEOUT_S": child_timeout_s(verdict),
        "MEMORY_MB": DEFAULT_MEMORY_MB, "ORT_LEVELS": dict(ORT_LEVEL_MEMBERS),
        "ONNX_CHECKED": converter.onnx_checked if (converter := CONVERTERS.get(case.converter)) else True,
    }
    return {name: repr(value) for name, value in values.items()}


class _NoCall(Converter):
    """Stands in for a converter that declares no repro.py call (or is not registered here)."""

    name = "no-call"
    libraries = ()
    repro_conversion = "no_conversion"


def _parsed(names: tuple[str, ...]) -> tuple[Module, ...]:
    """The harness modules `names`, parsed (the two usual sets once for all)."""
    known = {TORCH_HARNESS: TORCH_SCRIPT, UPSTREAM_HARNESS: UPSTREAM_SCRIPT}
    return known[names] if names in known else harness(names)


def upstream_export(options: Any) -> str:
    """The harness function that remakes the model an ONNX tool received, for its options (the upstream exporter's
    declared one; the saved upstream.onnx for the native model or an exporter not registered here)."""
    upstream = options.get("upstream")
    exporter = CONVERTERS.get(upstream) if upstream and upstream != NATIVE else None
    return (exporter.repro_upstream_export if exporter else "") or UPSTREAM_AS_SAVED


def _source_exporter(converter: Converter, options: Any) -> Converter | None:
    """The exporter of the model a script starts from: the converter itself, an ONNX tool's upstream exporter, or
    None (the native model, written from PyTorch's graph in a script that starts from the source)."""
    return converter if converter.role is Role.EXPORTER else CONVERTERS.get(options.get("upstream", ""))


def _source_model(converter: Converter, options: Any, graph: Graph) -> dict[str, str]:
    """The script's model part, as the exporter of the model it starts from writes it (Converter.repro_model)."""
    exporter = _source_exporter(converter, options)
    return dict(exporter.repro_model(graph)) if exporter is not None else {"Repro": render_module(graph)}


def render_repro(case: Any, converter: Converter | None = None) -> str:
    """The standalone repro.py of a CaseData (see module doc): from the saved upstream model, without torch, for a
    converter that starts from one (Converter.role); from the graph written in its framework otherwise, with the
    harness modules and functions the converter declares. `converter`: the registry entry the case was found with,
    when it is not one of CONVERTERS."""
    verdict = case.verdict
    found = converter or CONVERTERS.get(case.converter)
    # A converter that declares no call a script can make (or is not registered here): the script says so, exit 3.
    plan = found if found is not None and found.repro_conversion else _NoCall()
    from_upstream = (plan.role.starts_upstream and case.upstream_model is not None
                     and bool(plan.repro_upstream_conversion))
    libraries = (*_HARNESS_LIBS, *(found.libraries if found else ()))
    opening = {"title": f"convsmith case {case.id}: {verdict.symptom.json_name} in {case.converter} "
                        f"({verdict.stage.value})", "libs": _LIBS_MARK}
    rendered = {"transform": render_transform(case, found), "export": render_export(case, found)}
    if from_upstream:
        chosen = {"convert_and_run": plan.repro_upstream_conversion}
        script = assemble(_parsed(plan.upstream_harness), case_values(case), opening, chosen, rendered)
        return script.replace(_LIBS_MARK, imported_libraries(script, libraries), 1)
    chosen = {"convert_and_run": plan.repro_conversion}
    if plan.role.starts_upstream:
        chosen["export_upstream"] = upstream_export(case.converter_options)
    rendered.update(_source_model(plan, case.converter_options, case.graph))
    script = assemble(_parsed(plan.source_harness), case_values(case), opening, chosen, rendered)
    return script.replace(_LIBS_MARK, imported_libraries(script, libraries), 1)


def imported_libraries(script: str, libraries: Sequence[str]) -> str:
    """'torch, numpy, openvino': those of `libraries` the script imports, in that order (the docstring says what a
    user needs installed, which is what the harness modules chosen for the case import)."""
    imported = set(_IMPORT.findall(script))
    return ", ".join(lib for lib in dict.fromkeys(libraries) if lib.split(".")[0] in imported)

__all__ = ["identifier", "render_module", "render_repro"]
