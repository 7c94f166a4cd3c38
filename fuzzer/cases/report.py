"""report.md for a case folder: an issue ready to paste upstream (title, environment, repro, observed vs
expected with metrics, where it goes wrong, the minimized graph as ASCII and DOT)."""

from __future__ import annotations

import re
from typing import Any

from fuzzer.cases.repro import render_repro
from generators.dot import to_dot
from generators.ir import Graph

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def ascii_graph(graph: Graph) -> str:
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
    lines.append(f"outputs: {', '.join(graph.outputs)}")
    return "\n".join(lines)


def innermost_frame(log: str) -> str | None:
    """The last 'File ..., line N, in fn' of the last traceback in a log, as 'path:N in fn'."""
    frames = _FRAME.findall(log)
    if not frames:
        return None
    path, line, fn = frames[-1]
    return f"{path.split('site-packages/')[-1]}:{line} in {fn}"


def localization(case: Any) -> str:
    verdict = case.verdict
    if verdict.diverging_op:
        return (f"The first operator whose output diverges is `{verdict.diverging_op}` "
                f"({verdict.diverging_dtype}); the diverging stage is {verdict.stage.value}.")
    frame = innermost_frame(case.log)
    where = f", in `{frame}`" if frame else ""
    return f"It fails at the {verdict.stage.value} stage of {case.converter}{where}."


def _metrics_table(case: Any) -> str:
    rows = ["| output | ok | reason | shape (observed/expected) | dtype (observed/expected) | max abs | max rel "
            "| bad / total | tolerance (rtol, atol) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, m in zip(case.graph.outputs, case.verdict.metrics, strict=False):
        rows.append(f"| {name} | {m.ok} | {m.reason.value} | {list(m.actual_shape)} / {list(m.expected_shape)} | "
                    f"{m.actual_dtype} / {m.expected_dtype} | {m.max_abs:.4g} | {m.max_rel:.4g} | "
                    f"{m.n_bad} / {m.n_total} | {m.tolerance.rtol:g}, {m.tolerance.atol:g} |")
    return "\n".join(rows)


def _observed(case: Any) -> str:
    verdict = case.verdict
    if verdict.metrics and not all(m.ok for m in verdict.metrics):
        return (f"**Observed:** {verdict.message}\n\n**Expected:** the converted model matches eager PyTorch within "
                f"the dtype's tolerance.\n\n{_metrics_table(case)}")
    return (f"**Observed:**\n\n```\n{verdict.message}\n```\n\n**Expected:** the conversion succeeds and the "
            f"converted model runs.")


def render_report(case: Any) -> str:
    verdict = case.verdict
    ops = ", ".join(dict.fromkeys(case.graph.ops())) or "no operators"
    title = f"{case.converter}: {verdict.symptom.json_name.replace('_', ' ')} at {verdict.stage.value} with {ops}"
    env = "\n".join(f"- {k}: {v}" for k, v in sorted(case.versions.items()))
    origin = f"\nReduced from `{case.original}`." if case.original else ""
    return f"""# {title}

## Summary
{localization(case)}
Converter `{case.converter}` with options `{dict(case.converter_options)}`.
Signature `{case.signature}`.{origin}

## Environment
{env}

## Reproduction
Save next to `weights/` and `test_data_set_0/` from the case folder and run `python repro.py` (exit 1 = the bug
shows). Inputs and expected outputs are in the ONNX test-case layout (`test_data_set_0/input_<i>.pb`,
`output_<i>.pb` eager float32, `reference_<i>.pb` float64).

```python
{render_repro(case).rstrip()}
```

## Observed vs expected
{_observed(case)}

## The minimized graph
```
{ascii_graph(case.graph)}
```

<details><summary>DOT</summary>

```dot
{to_dot(case.graph).rstrip()}
```
</details>
"""
