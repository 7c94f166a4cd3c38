"""report.md's "Cross-checks", "Suggested fix", "To avoid it until fixed" and "Since when" sections: a few lines
that say whose bug a case is and what to do meanwhile. Checks that differ only in their last word (ONNX Runtime's
levels) and one family (each onnxoptimizer pass) share a line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuzzer.cases.case_json import reduction_polished
from fuzzer.cases.diagnosis import (
    AT_LEVEL,
    BEFORE_ORT,
    BEFORE_TOOL,
    OTHER_EXPORTER,
    OTHER_FAILURE,
    PASSES,
    SAME_BUG,
    CrossCheck,
)
from fuzzer.cases.remedy import Bisection, Workaround
from fuzzer.converters.ort_levels import LEVELS

NAMES_SHOWN = 6  # a family line names at most this many members per outcome
OWN_RUN = AT_LEVEL.format("disabled")  # an exporter case's cross-check that is the case's own run (only theirs)
OTHER_SUFFIX = OTHER_EXPORTER.format("")
LEVEL_NAMES = frozenset(AT_LEVEL.format(level) for level in LEVELS)


FIRST_SIGHT = ("These are the checks that decide whose bug it is, run as the case was first filed. `convsmith "
               "reduce` on its folder polishes it and runs the rest (each optimization level or pass alone, a "
               "suggested fix, a workaround).\n\n")


def render_diagnosis(case: Any, tool: str) -> str:
    """The sections (the first two only once diagnosed); `tool` is the converter's display name."""
    if case.cross_checks is None:
        if not reduction_polished(case.reduction):
            return ("## Whose bug\nNot diagnosed yet: this case was reduced in a first, quick step. "
                    "`convsmith reduce` on its folder polishes it and runs the cross-checks.\n\n"
                    + render_remedies(case))
        return render_remedies(case)
    text = "## Cross-checks\n" + _cross_checks(case, tool) + "\n\n"
    if case.workaround is None:  # diagnosed as first filed (with_blame); the full diagnosis always searches one
        return text + FIRST_SIGHT + render_remedies(case)
    if case.verdict.symptom.is_divergence and case.model is not None and not _gone(case):
        text += "## Suggested fix\n" + _fix(case) + "\n\n"
    return text + render_remedies(case)


def render_remedies(case: Any) -> str:
    """The "To avoid it until fixed" and "Since when" sections, each only once searched or bisected."""
    text = ""
    if case.workaround is not None:
        text += "## To avoid it until fixed\n" + _workaround(case.workaround) + "\n\n"
    if case.bisection is not None:
        text += "## Since when\n" + _since_when(case.bisection) + "\n\n"
    return text


def _workaround(found: Workaround) -> str:
    if not found.found:
        tried = "; ".join(found.tried) if found.tried else "none applies to this converter"
        return f"None of the settings convsmith tried makes the outputs agree (tried: {tried})."
    tried = f"{len(found.tried)} setting{'s' if len(found.tried) != 1 else ''}"
    return (f"{found.setting[:1].upper()}{found.setting[1:]}: under it the case converts, runs and its outputs "
            f"agree (re-run on the case's inputs; tried {tried}, cheapest first).\n\n```python\n{found.code}\n```")


def _since_when(bisection: Bisection) -> str:
    runs = ", ".join(f"{r.version} {r.outcome.value}" for r in bisection.runs)
    return f"{bisection.summary()[:1].upper()}{bisection.summary()[1:]}. Releases run (oldest first): {runs}."


def _cross_checks(case: Any, tool: str) -> str:
    checks: Sequence[CrossCheck] = case.cross_checks
    if not checks:
        return "None apply to this case."
    lines = ["The same graph and inputs elsewhere (\"same bug\": the same symptom on the same operator):"]
    lines += [f"- {line}" for line in _lines(checks)]
    reading = _reading(case, tool)
    return "\n".join(lines + (["", reading] if reading else []))


def _lines(checks: Sequence[CrossCheck]) -> list[str]:
    lines: list[str] = []
    done: set[str] = set()
    i = 0
    while i < len(checks):
        check = checks[i]
        if check.group:
            if check.group not in done:
                done.add(check.group)
                lines.append(_family(check.group, [c for c in checks if c.group == check.group]))
            i += 1
            continue
        run = [check]
        while i + len(run) < len(checks) and _joins(run[0], checks[i + len(run)]):
            run.append(checks[i + len(run)])
        head = check.name.rsplit(" ", 1)[0]
        name = check.name if len(run) == 1 else f"{head} {', '.join(c.name.rsplit(' ', 1)[1] for c in run)}"
        lines.append(f"{name}: {check.outcome}" + "".join(f" ({c.culprit.sentence()})" for c in run if c.culprit))
        i += len(run)
    return lines


def _joins(first: CrossCheck, other: CrossCheck) -> bool:
    """Checks that differ only in the last word of their name and have one outcome share a line."""
    return (not other.group and other.outcome == first.outcome and " " in first.name
            and first.name.rsplit(" ", 1)[0] == other.name.rsplit(" ", 1)[0])


def _family(group: str, members: Sequence[CrossCheck]) -> str:
    """'onnxoptimizer, each pass alone (39): same bug with `a`, `b`; passes with the other 37'."""
    by_outcome: dict[str, list[str]] = {}
    for c in members:
        passes = c.options.get("passes") or ()
        by_outcome.setdefault(c.outcome, []).append(passes[0] if len(passes) == 1 else c.name)
    if list(by_outcome) == [PASSES]:
        return f"{group} ({len(members)}): passes with every one"
    parts = []
    for outcome, names in sorted(by_outcome.items(), key=lambda kv: (kv[0] != SAME_BUG, kv[0] == PASSES, kv[0])):
        if outcome == PASSES and len(by_outcome) > 1:
            parts.append(f"passes with the other {len(names)}")
            continue
        shown = ", ".join(f"`{n}`" for n in names[:NAMES_SHOWN]) + (f" and {len(names) - NAMES_SHOWN} more"
                                                                      if len(names) > NAMES_SHOWN else "")
        parts.append(f"{outcome} with {shown}")
    return f"{group} ({len(members)}): " + "; ".join(parts)


def _reading(case: Any, tool: str) -> str:
    """One sentence on what the cross-checks say, where a plain rule reads them; else ""."""
    by_name = {c.name: c.outcome for c in case.cross_checks}
    others = [o for n, o in by_name.items() if n.endswith(OTHER_SUFFIX)]
    other = PASSES if PASSES in others else SAME_BUG if others and set(others) == {SAME_BUG} else None
    before = by_name.get(BEFORE_TOOL) or by_name.get(BEFORE_ORT)
    levels = [o for n, o in by_name.items() if n in LEVEL_NAMES]
    exporter = OWN_RUN in by_name  # an exporter's divergence: its model rerun at every level, its own included
    if _gone(case):
        return "The case's own conversion no longer shows its bug here: there is nothing to attribute."
    said = []
    if other == PASSES:
        said.append(f"The other exporter converts this graph correctly: the fault is in {tool}.")
    elif other == SAME_BUG:
        said.append("Both exporters show it: a fault they share (a common decomposition, the ONNX operator's "
                    "definition, or ONNX Runtime's kernel).")
    if exporter and levels:
        if all(o == SAME_BUG for o in levels):
            said.append("Every ONNX Runtime optimization level shows it: the runtime's optimizer is not involved.")
        elif any(o == PASSES for o in levels):
            said.append("Some ONNX Runtime optimization levels hide it.")
    if case.converter_options.get("upstream") == "onnx-native" and not exporter:
        said.append(f"The model {tool} received was written by convsmith straight from the graph, and ONNX Runtime "
                    f"and onnx.reference agree on its outputs: the divergence comes in with {tool}.")
    if before == PASSES:
        said.append(f"The model was right before {tool}: the fault is in {tool}.")
    elif before == SAME_BUG:
        said.append(f"The model was already wrong before {tool}, alike: the fault is the exporter's.")
    elif before is not None and before.startswith(OTHER_FAILURE):
        said.append(f"The model had another failure before {tool}, not this one: this one is {tool}'s own.")
    return " ".join(said)


def _gone(case: Any) -> bool:
    """An exporter case whose own run (its model at ONNX Runtime's disabled level) passes now."""
    own = [c.outcome for c in case.cross_checks if c.name == OWN_RUN]
    return own == [PASSES]


def _fix(case: Any) -> str:
    fix = case.suggested_fix
    if fix is None:
        return ("No single edit of `model.onnx` that convsmith tries (the source operator's attribute values, its "
                "weights, a Cast, a rounding step, a modulo, an exact constant) makes the outputs agree.")
    return (f"`{fix.edit}` makes the outputs agree with PyTorch (on the case's inputs and fresh ones): "
            f"{fix.description}. (Found by trying small edits of `model.onnx`; edit {fix.tries}.)")
