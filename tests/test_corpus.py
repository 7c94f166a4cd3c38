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
