"""Every corpus case replayed on the installed versions: a known bug is xfail(strict=True), so the day upstream
fixes it this suite says so (XPASS fails the run); a must-pass case must pass. A known bug that now fails with
a different signature is a plain failure, not an expected one."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzer.cases.folder import read_case
from fuzzer.cases.replay import Outcome, replay

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


class KnownBugReproduces(Exception):
    """Raised when a known-bug case still shows its bug: the only failure its xfail accepts."""


def _params() -> list:
    params = []
    for path in sorted(p.parent for p in CORPUS.glob("*/case.json")):
        case = read_case(path)
        marks = [pytest.mark.xfail(strict=True, raises=KnownBugReproduces, reason=f"known bug {case.signature}")] \
            if case.expectation == "bug" else []
        params.append(pytest.param(path, id=path.name[:80], marks=marks))
    return params


@pytest.mark.parametrize("folder", _params())
def test_corpus_case(folder: Path) -> None:
    case = read_case(folder)
    assert case.expectation in ("bug", "pass"), f"{folder}: promoted cases carry an expectation"
    result = replay(case)
    if case.expectation == "bug":
        assert result.outcome is not Outcome.DIFFERENT, f"{result.line()}: update or re-promote the case"
        if result.outcome is Outcome.REPRODUCES:
            raise KnownBugReproduces(result.line())
        return  # fixed upstream: the strict xfail turns this pass into a failure that says so
    assert not result.verdict.is_bug, f"{case.id} must pass but gives {result.verdict.signature}"


REPORT_LINES = 80


@pytest.mark.parametrize("folder", [pytest.param(p.parent, id=p.parent.name[:80])
                                    for p in sorted(CORPUS.glob("*/case.json"))])
def test_corpus_report_says_whose_bug_in_few_lines(folder: Path) -> None:
    """Every corpus case is diagnosed, and its report.md names each cross-check's outcome in at most 80 lines."""
    case = read_case(folder)
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert case.cross_checks, f"{folder.name}: not diagnosed (fuzzer.cases.whose_bug.with_diagnosis)"
    assert len(report.splitlines()) <= REPORT_LINES
    section = report.split("## Cross-checks\n", 1)[1].split("\n## ", 1)[0]
    for check in case.cross_checks:
        assert (check.group or check.name.rsplit(" ", 1)[0]) in section and check.outcome in section, check.name
