"""repro.py for a case folder: plain PyTorch source of the graph, the same converter call, a comparison, an exit code.

The module is rendered from the graph, one line of torch code per node, each written by the operator's own
`torch_source` (tests/test_op_registry.py checks every operator's source against its forward, bit for bit).
The rest of the script is real Python, fuzzer/cases/harness/, copied by fuzzer/cases/assembly.py: the definitions
the case's converter needs, the case's values in place of the placeholders. The script needs torch, onnx,
onnxruntime and numpy (plus the ONNX optimizer under test, if any), never convsmith.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

from fuzzer.cases.assembly import assemble, harness
from fuzzer.cases.harness import export as export_harness
from fuzzer.cases.harness import from_torch as from_torch_harness
from fuzzer.cases.harness import from_upstream as from_upstream_harness
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.ort_levels import ORT_LEVEL_MEMBERS
from fuzzer.converters.upstream import starts_upstream
from fuzzer.support.confine import DEFAULT_MEMORY_MB
from generators.ir import Graph
from generators.registry import REGISTRY, OpRegistry
from oracles.compare import DEFAULT_TOLERANCES
from oracles.verdict import Symptom

# ---- rendering the module -----------------------------------------------------------------------------------

def identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or keyword.iskeyword(text):
        text = f"v_{text}"
    return text


def render_module(graph: Graph, registry: OpRegistry = REGISTRY) -> str:
    """`class Repro(torch.nn.Module)`: weights loaded from weights/<name>.pb, in forward one line per node, each
    the operator's own plain-PyTorch source."""
    names = {n: identifier(n) for n in graph.types}
    lines = ["class Repro(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for w in graph.weights:
        lines.append(f"        _register(self, {w!r}, load_tensor('weights/{w}.pb'))")
    args = ", ".join(names[n] for n in graph.inputs)
    lines += ["", f"    def forward(self, {args}):"]
    for w in graph.weights:
        lines.append(f"        {names[w]} = self.{w}")
    for node in graph.nodes:
        op = registry[node.op]
        expr = op.torch_source(node.attrs, [names[n] for n in node.inputs])
        # A one-piece split or unbind still returns a tuple: its one output is unpacked from it.
        targets = ", ".join(names[o] for o in node.outputs) + ("," if op.returns_sequence and len(node.outputs) == 1
                                                              else "")
        lines.append(f"        {targets} = {expr}  # {node.op}")
    lines.append(f"        return ({''.join(names[o] + ', ' for o in graph.outputs)})")
    return "\n".join(lines) + "\n"


# ---- the script ------------------------------------------------------------------------------------------------

# ONNX-to-ONNX converters: their repro.py starts from the saved upstream.onnx and needs no torch.
_HARNESS_LIBS = frozenset({"torch", "torch.onnx", "onnx", "onnxruntime", "numpy"})  # named in every script
ONNX_TOOLS = frozenset(name for name, converter in CONVERTERS.items() if starts_upstream(converter))
HANG_AFTER_S = re.compile(r"no result after (\d+(?:\.\d+)?) s")
LOST_CHILD_TIMEOUT_S = 600  # a death case's child that neither dies nor ends by then fails otherwise
# The harness modules of each kind of repro.py, head first, read once: a campaign renders what it started with.
TORCH_SCRIPT = harness(("head", "torch_tensors", "runtime", "judging", "child", "export", "from_torch"))
UPSTREAM_SCRIPT = harness(("head", "numpy_tensors", "runtime", "judging", "child", "from_upstream"))


def render_transform(case: Any, converter: Converter | None = None) -> str:
    """`transform(model)`: the ONNX-to-ONNX converter's own call (its `snippet`, as report.md writes it too)."""
    converter = converter or CONVERTERS.get(case.converter)
    try:
        call = converter.snippet(converter.options(case.converter_options)) if converter else None
    except NotImplementedError:
        call = None
    if call is None or call.from_torch:
        body = [f"print('repro.py: cannot run: it has no call of {case.converter}', file=sys.stderr)",
                "raise SystemExit(3)"]
    else:  # the ORT optimizer's call is the session's level: its model goes through unchanged
        body = [*call.imports, *call.lines, "return model"]
    lines = ["def transform(model):", '    """The ONNX-to-ONNX converter under test."""']
    return "\n".join(lines + [f"    {line}" for line in body]) + "\n"


def expected_error(message: str) -> str:
    """'onnx.onnx_cpp2py_export.shape_inference.InferenceError: ...' -> 'InferenceError'."""
    head = message.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if re.fullmatch(r"[\w.]+", head) else ""


def child_timeout_s(verdict: Any) -> float:
    """How long a lost case's repro.py waits for its converting child: a hang's own timeout, else a long while."""
    found = HANG_AFTER_S.search(verdict.message) if verdict.symptom.json_name == "hang" else None
    return float(found.group(1)) if found else LOST_CHILD_TIMEOUT_S


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
    }
    return {name: repr(value) for name, value in values.items()}


def render_repro(case: Any, converter: Converter | None = None) -> str:
    """The standalone repro.py of a CaseData (see module doc): from the saved upstream model, without torch, for an
    ONNX-to-ONNX converter; from the graph written as plain PyTorch otherwise. `converter`: the registry entry the
    case was found with, when it is not one of CONVERTERS."""
    verdict = case.verdict
    converter = converter or CONVERTERS.get(case.converter)
    from_upstream = converter is not None and starts_upstream(converter) and case.upstream_model is not None
    extra = "".join(f", {lib}" for lib in (converter.libraries if converter else ()) if lib not in _HARNESS_LIBS)
    opening = {"title": f"convsmith case {case.id}: {verdict.symptom.json_name} in {case.converter} "
                        f"({verdict.stage.value})",
               "libs": ("" if from_upstream else "torch, ") + f"onnx, onnxruntime, numpy{extra}"}
    rendered = {"transform": render_transform(case, converter)}
    if from_upstream:
        chosen = {"convert_and_run": from_upstream_harness.conversion(case.converter).__name__}
        return assemble(UPSTREAM_SCRIPT, case_values(case), opening, chosen, rendered)
    chosen = {"convert_and_run": from_torch_harness.conversion(case.converter).__name__,
              "export_upstream": export_harness.upstream_export(case.converter_options).__name__}
    rendered["Repro"] = render_module(case.graph)
    return assemble(TORCH_SCRIPT, case_values(case), opening, chosen, rendered)


__all__ = ["render_module", "render_repro"]
