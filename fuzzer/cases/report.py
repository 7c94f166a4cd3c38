"""report.md for a case folder: an issue a maintainer can paste upstream as it is, in well under 80 lines.

A title in the maintainer's terms, one paragraph of what goes wrong, a snippet of about 25 lines that shows the
bug on its own (fuzzer/cases/snippet.py), observed against expected, whose bug it is (cross-checks and a suggested
fix, once diagnosed: fuzzer/cases/diagnosis_report.py), the graph, and every version. No local paths: cases are
named by id. The complete harness stays in repro.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import onnx

from fuzzer.cases.diagnosis_report import render_diagnosis
from fuzzer.cases.fault_site import PLUMBING, fault_site
from fuzzer.cases.snippet import render_snippet
from fuzzer.check.follow_up import ALONE_LABEL
from fuzzer.converters import CONVERTERS
from fuzzer.converters.capabilities import ShowsRewrite
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.rewrite_view import changed_ops, node_lines
from fuzzer.support.faults import message_frame, without_frame
from generators.ir import Graph
from generators.ops.onnx_nodes import OnnxCall
from generators.registry import REGISTRY
from oracles.dynamic import at_second_shape
from oracles.judgement import OUTPUT_COUNT
from oracles.rootcause import SHOWN_OPERATORS, UNLOCALIZED, explaining_error, verdict_root_cause
from oracles.verdict import Stage, Symptom

GRAPH_LINES = 14  # the graph section shows this many definitions at most (graph.dot has it all)
REWRITE_LINES = 10  # the rewrite section shows this many nodes of each model at most
MESSAGE_CHARS = 400
DIVERGENCE_WORDS = {"wrong_values": "gives wrong values", "wrong_shape": "gives the wrong output shape",
                    "wrong_dtype": "gives the wrong output dtype"}


def ascii_graph(graph: Graph, limit: int | None = None) -> str:
    """One line per tensor definition: inputs, weights, then `t0 = op(a, b) {attrs} : dtype[shape]`."""

    def typ(name: str) -> str:
        t = graph.types[name]
        return f"{t.dtype.value}[{'x'.join(map(str, t.shape)) or 'scalar'}]"

    lines = [f"input  {n} : {typ(n)}" for n in graph.inputs]
    lines += [f"weight {n} : {typ(n)}" for n in graph.weights]
    for node in graph.nodes:
        attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(node.attrs.items()))
        outs = ", ".join(f"{o} : {typ(o)}" for o in node.outputs)
        lines.append(f"{outs} = {node.op}({', '.join(node.inputs)}){' {' + attrs + '}' if attrs else ''}")
    if limit is not None and len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more (graph.dot has the whole graph)"]
    lines.append(f"outputs: {', '.join(graph.outputs)}")
    return "\n".join(lines)


def display_name(converter: str) -> str:
    conv = CONVERTERS.get(converter)
    return (conv.display_name if conv is not None else "") or converter


def title(case: Any) -> str:
    """'torch.onnx.export (TorchScript): `floor_divide` gives wrong values (int32)', or the error's first line; a
    case blamed on a component the converter only reached is titled by that component."""
    verdict = case.verdict
    symptom = verdict.symptom.json_name
    cause = verdict_root_cause(case.converter, verdict, case.graph.ops())
    blame = getattr(case, "blame", None)
    who = (f"{blame.component.project} ({blame.component.name}, through {display_name(case.converter)})"
           if blame is not None and (blame.shared or blame.settled and blame.component.key != case.converter)
           else display_name(case.converter))
    counts = OUTPUT_COUNTS.match(verdict.message) if symptom == Symptom.WRONG_SHAPE.json_name else None
    if counts is not None:
        return f"{who}: the model returns {counts.group(1)} outputs where the graph has {counts.group(2)}"
    if symptom in DIVERGENCE_WORDS:
        dtype = f" ({verdict.diverging_dtype})" if verdict.diverging_dtype else ""
        return f"{who}: {owner_operator_words(case, cause.shown_operator)} {DIVERGENCE_WORDS[symptom]}{dtype}"
    exc, _, message = explaining_error(verdict.message).partition(": ")
    first = message.strip().splitlines()[0] if message.strip() else ""
    where = (f"on {owner_operator_words(case, cause.shown_operator)}" if cause.shown_operator != UNLOCALIZED
             else died_in(verdict.message, case.graph.ops()))
    return (f"{who}: {exc.rsplit('.', 1)[-1]} at {stage_words(verdict.stage)} "
            f"{where}: {cut_at_word(without_frame(first), TITLE_DETAIL)}")


def owner_operator_words(case: Any, op: str) -> str:
    """The operator as the converter's maintainers know it: for a tool that takes ONNX, the ONNX operators the one
    graph operator of a (reduced) case became in the model it received ('`Transpose` (from `permute`)'); else
    operator_words."""
    upstream = getattr(case, "upstream_model", None)  # only a tool that takes ONNX received one
    if upstream is None or op[:1].isupper() or op not in case.graph.ops():
        return operator_words(op)
    nodes = onnx.load_from_string(upstream).graph.node
    received = list(dict.fromkeys(n.op_type for n in nodes if n.op_type not in PLUMBING))
    # A graph of that one operator: every node the tool received is its; else the operators its ONNX counterpart
    # is written with, those of them the received model holds.
    types = received if list(dict.fromkeys(case.graph.ops())) == [op] else \
        [t for t in counterpart_types(case, op) if t in received]
    if not types:
        return operator_words(op)
    return f"{', '.join(f'`{t}`' for t in types[:SHOWN_OPERATORS])} (from `{op}`)"


def counterpart_types(case: Any, op: str) -> tuple[str, ...]:
    """The ONNX operator types the graph's first `op` node is written with by its ONNX counterpart, at the case's
    opset."""
    graph = case.graph
    node = next(n for n in graph.nodes if n.op == op)
    types = {**graph.inputs, **graph.weights, **graph.types}
    call = OnnxCall(node.inputs, node.outputs, tuple(types[n] for n in node.inputs),
                    tuple(types[n] for n in node.outputs), int(case.converter_options.get("opset", 18)))
    return REGISTRY[op].onnx_op_types(node.attrs, call)


def operator_words(op: str) -> str:
    """'`sin`', or for one of convsmith's patterns '`pattern_layer_norm` (layer normalization ... written out)'."""
    try:
        description = REGISTRY[op].description()
    except KeyError:  # an ONNX operator the error names
        description = ""
    return f"`{op}`" + (f" ({description})" if description else "")


def whose_bug(case: Any) -> str:
    """report.md's "Whose bug" section: where to file it, and the evidence run to decide (or what is known)."""
    blame = getattr(case, "blame", None)
    if blame is None:
        return ""
    lead = "File it with" if blame.settled else "Filed with (not settled: the evidence below is what is known)"
    lines = [f"{lead} {blame.file_with()}.", "", "Evidence, each run on this case's graph and inputs:"]
    return "## Whose bug\n" + "\n".join(lines + [f"- {line}" for line in blame.evidence]) + "\n\n"


def stage_words(stage: Stage, article: str = "", noun: str = "") -> str:
    """'the node conversion stage'; a process that died where its dump names no step is at 'an unknown step'."""
    return "an unknown step" if stage is Stage.NONE else article + stage.value.replace("_", " ") + noun


OUTPUT_COUNTS = re.compile(OUTPUT_COUNT.replace("{}", r"(\d+)"))
TITLE_DETAIL = 100  # characters of the error's first line a title quotes


def died_in(message: str, graph_ops: Sequence[str] = ()) -> str:
    """Where a conversion whose operator is not known failed: the function of its innermost frame, when the message
    ends in one ('in `symbolic_opset9._pad_circular`'), else on one of the graph's operators, none isolated."""
    found = message_frame(message.strip().splitlines()[0] if message.strip() else "")
    if found is None:
        ops = list(dict.fromkeys(graph_ops))
        more = f" and {len(ops) - SHOWN_OPERATORS} more" if len(ops) > SHOWN_OPERATORS else ""
        return (f"on one of {', '.join(f'`{op}`' for op in ops[:SHOWN_OPERATORS])}{more} (not isolated)" if ops
                else "on an operator not isolated")
    module = found[0].rsplit("/", 1)[-1].removesuffix(".py")
    return f"in `{module}.{found[1]}`"


def cut_at_word(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a space (never inside a word or a path), '…' marking the cut."""
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return head.rstrip(" ,:;") + "…"


def summary(case: Any) -> str:
    verdict = case.verdict
    nodes, names = len(case.graph.nodes), case.graph.ops()
    if not nodes and case.upstream_model:  # a cut of a real model (fuzzer/modelcheck/cut_case.py): ONNX nodes only
        names = [n.op_type for n in onnx.load_from_string(bytes(case.upstream_model)).graph.node]
        nodes = len(names)
    ops = ", ".join(f"`{op}`" for op in dict.fromkeys(names))
    options = ", ".join(f"{k}={v}" for k, v in sorted(case.converter_options.items()))
    what = DIVERGENCE_WORDS.get(verdict.symptom.json_name, f"fails ({verdict.symptom.json_name.replace('_', ' ')})")
    text = (f"Converting a {nodes}-operator model ({ops}) with {display_name(case.converter)} "
            f"({options}) {what} at {stage_words(verdict.stage, 'the ', ' stage')}.")
    if verdict.diverging_op and any(label.startswith(f"{ALONE_LABEL}:") for label in verdict.labels):
        text += (f" `{verdict.diverging_op}` ({verdict.diverging_dtype}) gives a wrong output converted alone, on the "
                 "values it reads in this model.")
    elif verdict.diverging_op:
        text += f" The first operator whose output is wrong is `{verdict.diverging_op}` ({verdict.diverging_dtype})."
    reduced = " (minimized by convsmith)" if case.reduction else ""
    return text + dynamic_note(case) + f" Case `{case.id}`{reduced}."


def dynamic_note(case: Any) -> str:
    """What a dynamic export marks, and the shapes its model ran at; empty for a static export."""
    if case.dynamic is None:
        return ""
    dims = DynamicAxes.from_json(case.dynamic).dims
    marked = ", ".join(f"`{d.name}` ({', '.join(f'{n}[{a}]' for n, a in d.axes)}"
                       f"{f', {d.min} to {d.max}' if d.min is not None else ''})" for d in dims)
    text = f" The export marks {marked or 'no dim'} dynamic"
    if not case.second_inputs:
        return text + "; the graph has no other shape, so the model ran only at the traced one."
    traced = ", ".join(f"{n} {tuple(x.shape)}" for n, x in zip(case.graph.inputs, case.inputs, strict=False))
    second = ", ".join(f"{n} {tuple(x.shape)}" for n, x in zip(case.graph.inputs, case.second_inputs, strict=False))
    text += f"; traced at {traced}, the model also runs at {second}"
    return text + (", and only there does it fail." if at_second_shape(case.verdict) else ".")


def observed(case: Any) -> str:
    verdict = case.verdict
    if verdict.symptom.json_name not in DIVERGENCE_WORDS:
        message = verdict.message[:MESSAGE_CHARS].rstrip()
        return f"```\n{message}\n```\nExpected: the conversion succeeds and the model runs."
    rows = ["| output | reason | shape observed / expected | dtype observed / expected | max abs diff "
            "| elements wrong |", "|---|---|---|---|---|---|"]
    for name, m in zip(case.graph.outputs, verdict.metrics, strict=False):
        if not m.ok:
            rows.append(f"| {name} | {m.reason.value} | {list(m.actual_shape)} / {list(m.expected_shape)} | "
                        f"{m.actual_dtype} / {m.expected_dtype} | {m.max_abs:.4g} | {m.n_bad} of {m.n_total} |")
    second = at_second_shape(verdict) and bool(case.second_expected)
    wanted = case.second_expected if second else case.expected
    expected = "; ".join(f"{n} = {_values(x)}" for n, x in zip(case.graph.outputs, wanted, strict=False))
    where = " at the second shape" if second else ""
    # A cut of a real model (fuzzer/modelcheck/cut_case.py) has no PyTorch module: what it should compute is the
    # uncut ONNX model it was cut from, run on ONNX Runtime.
    source = "the model the tool received, cut the same way, run on ONNX Runtime" if "cut" in verdict.labels else \
        "eager PyTorch"
    return "\n".join(rows) + (f"\n\nExpected ({source}{where}): {expected}." if expected else "")


def _values(x: Any) -> str:
    flat = list(x.ravel()[:6])
    return "[" + ", ".join(str(v) for v in flat) + (", ...]" if x.size > 6 else "]")


def environment(case: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(case.versions.items()))


def the_rewrite(case: Any) -> str:
    """The model the blamed rewrite received and what it made of it (a finding blamed on one transformer or pass),
    else ''."""
    converter = CONVERTERS.get(case.converter)
    if not isinstance(converter, ShowsRewrite) or case.upstream_model is None:
        return ""
    view = converter.rewrite_view(bytes(case.upstream_model), fault_site(case))
    if view is None:
        return ""
    before = "\n".join(node_lines(view.before, REWRITE_LINES))
    if view.after is None:
        after = f"After it: none, the {view.rewrite} fails: `{cut_at_word(view.error, MESSAGE_CHARS)}`"
    else:
        after = (f"After it ({changed_ops(view) or 'no op type added or removed'}):\n```\n"
                 + "\n".join(node_lines(view.after, REWRITE_LINES)) + "\n```")
    return f"## The rewrite\nBefore the {view.rewrite}, {view.before_is}:\n```\n{before}\n```\n{after}\n\n"


def render_report(case: Any) -> str:
    snippet = render_snippet(case)
    reproduce = ("Run in the case folder (larger tensors are read from its `test_data_set_0/` and `weights/`). It "
                 "ends in the error, or in numpy's assertion showing expected against observed.\n\n"
                 f"```python\n{snippet}\n```\n" if snippet else "")
    return f"""# {title(case)}

{summary(case)}

{whose_bug(case)}## Reproduce
{reproduce}The complete harness is `repro.py` in the case folder: `python repro.py` exits 1 while the bug shows
(4 when it fails otherwise).

## Observed vs expected
{observed(case)}

{render_diagnosis(case, display_name(case.converter))}{the_rewrite(case)}## Graph
```
{ascii_graph(case.graph, GRAPH_LINES)}
```

## Environment
{environment(case)}. Found by convsmith (signature `{case.signature}`).
"""
