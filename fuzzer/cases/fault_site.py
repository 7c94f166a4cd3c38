"""Where a case's bug showed, as a converter reads it to name the component at fault: the stage, the operator, the
package of the failing frame and the rewrites named behind it. Part of the case, read by its report and by the
diagnosis (fuzzer/diagnosis/)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from fuzzer.cases.case import CaseData, logged_frame
from fuzzer.cases.diagnosis import SAME_BUG, CrossCheck
from fuzzer.converters.culprit import Culprit, FoundBy, from_labels
from fuzzer.converters.describe import FaultSite
from oracles.rootcause import verdict_root_cause

# The ONNX operators that move or retype data without computing: a model's computing operators are the others.
PLUMBING = frozenset({"Constant", "Identity", "Cast", "CastLike", "Reshape", "Unsqueeze", "Squeeze", "Shape"})
_PACKAGE = re.compile(r"(?:site|dist)-packages[/\\]([A-Za-z0-9_]+)[/\\]")


def frame_owner(case: CaseData) -> str:
    """The top-level package of the failing innermost frame (from the case's log, or a dead worker's message)."""
    text = logged_frame(case.log) or case.verdict.message
    package = _PACKAGE.search(text)
    return package.group(1) if package else ""


def fault_site(case: CaseData) -> FaultSite:
    """Where the case's bug showed, as its converter reads it to name a component, with the rewrites named behind
    it (case_culprits)."""
    cause = verdict_root_cause(case.converter, case.verdict, case.graph.ops())
    return FaultSite(case.verdict.stage, cause.shown_operator, frame_owner(case), case.verdict.labels,
                     dict(case.converter_options), case_culprits(case), tuple(case.graph.ops()))


def case_culprits(case: CaseData) -> tuple[Culprit, ...]:
    """The rewrites named behind the case's bug: a bisection's (its test's, kept on the verdict, else a cross-check's:
    a crash's bisection runs there), then each pass that shows the bug alone (the cross-checks run each)."""
    checks = case.cross_checks or ()
    bisected = [c.culprit for c in checks if c.outcome == SAME_BUG and c.culprit is not None]
    own = from_labels(case.converter, case.verdict.labels)
    return (*([own] if own is not None else bisected[:1]), *passes_alone(checks))


def passes_alone(checks: Sequence[CrossCheck]) -> tuple[Culprit, ...]:
    """The passes that show the case's bug run alone, as culprits."""
    alone = [c for c in checks if c.outcome == SAME_BUG and len(c.options.get("passes") or ()) == 1]
    return tuple(Culprit(c.converter, FoundBy.ALONE, c.options["passes"][0]) for c in alone)
