"""The folder `convsmith check MODEL --out DIR` writes: verdicts.json (every converter's verdict, located node,
diagnosis and repair), and per converter with a wrong target its converted model, a picture of the located node's
neighbourhood and, only when the repair passed the oracle, repaired.onnx; per failing converter its reduced case
folder to file upstream and its root cause, known or not (filing.py); summary.md says the same for people."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from fuzzer.modelcheck.check_model import ModelResult
from fuzzer.modelcheck.filing import Filing
from fuzzer.modelcheck.model import UserModel
from fuzzer.modelcheck.neighbourhood import neighbourhood_dot
from fuzzer.support.files import atomic_write_bytes, atomic_write_text

VERDICTS = "verdicts.json"
REPAIRED = "repaired.onnx"
CONVERTED = "converted.onnx"
LOCATED = "located.dot"


def write_folder(out: Path, model: UserModel, results: list[ModelResult],
                 filings: Mapping[str, Filing] | None = None) -> None:
    """The folder's files beside the case folders `filings` name (written there already)."""
    filings = filings or {}
    out.mkdir(parents=True, exist_ok=True)
    data = {"model": model.label, "inputs": [s.__dict__ for s in model.slots],
            "converters": [result_json(r, filings, out) for r in results]}
    atomic_write_text(out / VERDICTS, json.dumps(data, indent=1, default=list) + "\n")
    for result in results:
        if result.repair is None:
            continue
        own = out / result.conversion.converter
        own.mkdir(exist_ok=True)
        target = result.conversion.target_onnx
        if target is not None:
            atomic_write_bytes(own / CONVERTED, target)
        first = result.repair.rounds[0].location if result.repair.rounds else None
        if target is not None and first is not None:  # the first round's node, in the converted model
            atomic_write_text(own / LOCATED, neighbourhood_dot(target, first))
        if result.repair.repaired and result.repair.model is not None:
            atomic_write_bytes(own / REPAIRED, result.repair.model)
    atomic_write_text(out / "summary.md", summary(model, results, filings, out))


def result_json(result: ModelResult, filings: Mapping[str, Filing], base: Path | None = None) -> dict[str, object]:
    """A converter's verdict, repair and, where it failed, its filing (its case folder relative to `base`)."""
    filing = filings.get(result.conversion.converter)
    return {**result.to_json(), **(filing.to_json(base) if filing is not None else {})}


def summary(model: UserModel, results: list[ModelResult], filings: Mapping[str, Filing], out: Path) -> str:
    """One section per converter: verdict, located node, diagnosis, repair, upstream case (its folder relative to
    `out`) and root cause."""
    lines = [f"# {model.label}", ""]
    for result in results:
        verdict = result.conversion.verdict
        lines.append(f"## {verdict.converter}: {verdict.symptom.json_name}")
        if verdict.message:
            lines.append(f"- {verdict.message.splitlines()[0]}")
        lines += repair_lines(result)
        filing = filings.get(verdict.converter)
        lines += filing.lines(out) if filing is not None else []
        lines.append("")
    return "\n".join(lines)


def repair_lines(result: ModelResult) -> list[str]:
    """The rounds of a repair as list items, and whether it passed the oracle."""
    if result.repair is None:
        return []
    lines = []
    for step in result.repair.rounds:
        if step.location is not None:
            where = step.location
            layer = f", layer {where.layer}" if where.layer else ""
            after = "fails to run or changes shape" if where.after == float("inf") else f"{where.after:.3g}"
            lines.append(f"- first diverging node: {where.op_type} {where.node or where.output}{layer} "
                         f"(max abs before {where.before:.3g}, after {after})")
        lines += [f"- {f.kind.value}: {f.detail}; repair: {f.edit.describe()}" for f in step.findings]
    state = "repaired" if result.repair.repaired else "not repaired"
    lines.append(f"- {state}: {result.repair.reason}")
    return lines
