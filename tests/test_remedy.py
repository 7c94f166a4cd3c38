"""A case's workaround and bisection: kept in case.json as written, and rendered in report.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fuzzer.cases.case_json import case_fields
from fuzzer.cases.folder import read_case
from fuzzer.cases.remedy import Bisection, ReleaseOutcome, ReleaseRun, Workaround
from fuzzer.cases.report import render_report

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASE = CORPUS / "crash-ort-optimizer-graph_optimization-Fail-e83800d5cf55-reduced"
REGRESSION = Bisection("onnxruntime", (ReleaseRun("1.19.2", ReleaseOutcome.PASSES),
                                       ReleaseRun("1.20.0", ReleaseOutcome.ERROR, "no wheel for cp311"),
                                       ReleaseRun("1.21.0", ReleaseOutcome.BUG)), "1.21.0", "1.19.2")
BASIC = Workaround(("ONNX Runtime's extended level", "ONNX Runtime's basic level"), "ONNX Runtime's basic level",
                   "ort-optimizer", {"level": "basic"},
                   "so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC")


@pytest.mark.parametrize("bisection", [REGRESSION, None])
@pytest.mark.parametrize("workaround", [BASIC, Workaround(("a", "b")), None])
def test_case_json_keeps_workaround_and_bisection(workaround: Workaround | None, bisection: Bisection | None) -> None:
    case = dataclasses.replace(read_case(CASE), workaround=workaround, bisection=bisection)
    fields = case_fields(case.to_json(), "here")
    assert fields["workaround"] == workaround and fields["bisection"] == bisection


@pytest.mark.parametrize(("bisection", "summary"), [
    (REGRESSION, "a regression since onnxruntime 1.21.0 (1.19.2 does not show it)"),
    (dataclasses.replace(REGRESSION, last_good=""), "present since at least onnxruntime 1.21.0 (every release "
     "tested since shows it)"),
    (dataclasses.replace(REGRESSION, first_bad="", last_good=""), "not shown by any release of onnxruntime tested"),
])
def test_bisection_summary(bisection: Bisection, summary: str) -> None:
    assert bisection.summary() == summary


def test_report_says_how_to_avoid_it_and_since_when() -> None:
    report = render_report(dataclasses.replace(read_case(CASE), workaround=BASIC, bisection=REGRESSION))
    assert ("## To avoid it until fixed\nONNX Runtime's basic level: under it the case converts, runs and its outputs "
            "agree (re-run on the case's inputs; tried 2 settings, cheapest first).\n\n```python\n"
            "so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC\n```\n") in report
    assert ("## Since when\nA regression since onnxruntime 1.21.0 (1.19.2 does not show it). Releases run (oldest "
            "first): 1.19.2 passes, 1.20.0 error, 1.21.0 bug.\n") in report


def test_report_says_when_no_setting_helps_and_leaves_out_what_was_not_searched() -> None:
    case = read_case(CASE)
    report = render_report(dataclasses.replace(case, workaround=Workaround(("a", "b"))))
    assert "## To avoid it until fixed\nNone of the settings convsmith tried makes the outputs agree (tried: a; b).\n" \
        in report
    plain = render_report(dataclasses.replace(case, workaround=None, bisection=None))
    assert "## To avoid it until fixed" not in plain and "## Since when" not in plain
