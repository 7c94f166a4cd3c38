"""The rewrite behind a converter's bug, as a value: which tool, which rewrite (an ONNX Runtime transformer, an
onnxoptimizer pass, a fusion flag), at which ONNX Runtime level, and how it was found. A bisection or a cross-check
returns one; the blame, the workaround and the report read it. Its labels on a verdict and its sentence in a report
are written and read back here only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

LEVEL_LABEL = "ort-level"  # the verdict label of the lowest ONNX Runtime level that shows a bisected bug


class FoundBy(Enum):
    """How a culprit was named."""

    BISECTION = "bisection"  # the tool's rewrites halved (disabled) until disabling one alone removes the bug
    ALONE = "alone"  # the rewrite run alone (a cross-check) shows the bug


@dataclass(frozen=True)
class Culprit:
    """A rewrite of `tool` (a registry name) that a bisection or a cross-check names; `rewrite` is "" where a
    bisection found the lowest `level` showing the bug but no single rewrite behind it."""

    tool: str
    found_by: FoundBy
    rewrite: str = ""
    level: str = ""  # the lowest ONNX Runtime level that shows the bug ("" where the tool has no levels)

    def sentence(self) -> str:
        """What a report says: 'lowest level showing it: basic; disabling ConstantFolding alone removes it'."""
        if self.found_by is FoundBy.ALONE:
            return f"{self.rewrite} alone shows it"
        named = f"disabling {self.rewrite} alone removes it" if self.rewrite else "no single optimizer named"
        return f"lowest level showing it: {self.level}; {named}" if self.level else named

    def labels(self) -> tuple[str, ...]:
        """The verdict labels that keep a bisection's culprit with the case's verdict (from_labels reads them)."""
        level = (f"{LEVEL_LABEL}:{self.level}",) if self.level else ()
        return (*level, f"{self.tool}:{self.rewrite}") if self.rewrite else level

    def to_json(self) -> dict[str, str]:
        return {"tool": self.tool, "found_by": self.found_by.value, "rewrite": self.rewrite, "level": self.level}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Culprit:
        return cls(str(data["tool"]), FoundBy(data["found_by"]), str(data.get("rewrite", "")),
                   str(data.get("level", "")))


def from_labels(tool: str, labels: Iterable[str]) -> Culprit | None:
    """The bisection's culprit that `Culprit.labels` put on a verdict of `tool`; None where it has no level label."""
    found = dict(label.split(":", 1) for label in labels if label.startswith((f"{LEVEL_LABEL}:", f"{tool}:")))
    if LEVEL_LABEL not in found:
        return None
    return Culprit(tool, FoundBy.BISECTION, found.get(tool, ""), found[LEVEL_LABEL])


def from_sentence(tool: str, text: str) -> Culprit | None:
    """A bisection's culprit from its `sentence`, as case.json files kept it before it was stored as a value."""
    head, sep, named = text.partition("; ")
    level = head.removeprefix("lowest level showing it: ")
    if not sep or level == head:
        return None
    rewrite = named.removeprefix("disabling ").removesuffix(" alone removes it")
    return Culprit(tool, FoundBy.BISECTION, "" if rewrite == named else rewrite, level)


def named(culprits: Sequence[Culprit], found_by: FoundBy) -> tuple[str, ...]:
    """The rewrites the culprits found so name, in order."""
    return tuple(c.rewrite for c in culprits if c.found_by is found_by and c.rewrite)


def bisected(culprits: Sequence[Culprit]) -> Culprit | None:
    """The culprit a bisection found, if any."""
    return next((c for c in culprits if c.found_by is FoundBy.BISECTION), None)
