"""The search for the first release of a library that shows a case's bug: the installed release first (it must show
it), then the oldest in range, then a binary search of the boundary. A release that errs (will not install or
import, or repro.py fails otherwise) is stepped over, never counted as good or bad."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from packaging.version import Version

from fuzzer.cases.remedy import Bisection, ReleaseOutcome, ReleaseRun


class ReleaseRunner(Protocol):
    """What runs a case's repro.py under one release (the real one, or a fake in tests)."""

    def __call__(self, version: str) -> ReleaseRun:
        raise NotImplementedError


class NotShown(Exception):
    """The installed release does not show the case's bug: there is nothing to bisect (one line: what it showed)."""


@dataclass
class _Search:
    """The runs made so far: each release runs at most once."""

    runner: Callable[[str], ReleaseRun]
    runs: dict[str, ReleaseRun]

    def outcome(self, version: str) -> ReleaseOutcome:
        if version not in self.runs:
            self.runs[version] = self.runner(version)
        return self.runs[version].outcome


def bisect_releases(distribution: str, releases: Sequence[str], installed: str,
                    runner: Callable[[str], ReleaseRun]) -> Bisection:
    """Bisect `releases` (any order; `installed` among them) with `runner`; NotShown when the installed release does
    not show the bug. Newer releases than the installed one are run too, after the search, for the record."""
    ordered = sorted(set(releases) | {installed}, key=Version)
    search = _Search(runner, {})
    first = search.outcome(installed)
    if first is not ReleaseOutcome.BUG:
        detail = search.runs[installed].detail
        raise NotShown(f"not shown on the installed stack ({distribution} {installed}: {first.value}"
                       + (f", {detail})" if detail else ")"))
    older = ordered[:ordered.index(installed)]
    first_bad, last_good = _boundary(search, older, installed)
    for version in ordered[ordered.index(installed) + 1:]:
        search.outcome(version)
    runs = tuple(search.runs[v] for v in ordered if v in search.runs)
    return Bisection(distribution, runs, first_bad, last_good)


def _boundary(search: _Search, older: Sequence[str], installed: str) -> tuple[str, str]:
    """(first bad, last good) among `older` (oldest first) and the installed release, which shows the bug."""
    chain = [*older, installed]
    floor, bad, good = -1, len(chain) - 1, None
    # The oldest first; where it errs (old releases lack what repro.py calls), halve toward the first bad one until a
    # release runs: old releases err together, so a walk one by one would install most of them for nothing.
    while good is None and floor + 1 < bad:
        probe = 0 if floor < 0 else (floor + bad) // 2
        outcome = search.outcome(chain[probe])
        if outcome is ReleaseOutcome.ERROR:
            floor = probe
        elif outcome is ReleaseOutcome.BUG:
            bad = probe
        else:
            good = probe
    if good is None:
        return chain[bad], ""
    while True:
        between = [i for i in range(good + 1, bad) if search.runs.get(chain[i]) is None]
        if not between:
            return chain[bad], chain[good]
        middle = between[len(between) // 2]
        outcome = search.outcome(chain[middle])
        if outcome is ReleaseOutcome.BUG:
            bad = middle
        elif outcome is ReleaseOutcome.PASSES:
            good = middle


__all__ = ["NotShown", "ReleaseRunner", "bisect_releases"]
