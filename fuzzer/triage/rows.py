"""The report page's table: one row per root cause, with relative links to its case's report and repro."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from fuzzer.triage.model import RootCauseGroup

if TYPE_CHECKING:
    from fuzzer.triage.impact import Impact

# Terminal colour codes (numbers already normalised to <n>) and other control characters some exporters print.
_CONTROL = re.compile(r"\x1b\[[0-9;<>n]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class Row:
    """One root cause as the table shows it; links are relative to the page's folder (None: no such file)."""

    key: str
    title: str
    error: str  # the error class, or the title where there is none (a wrong model): what the table shows
    converter: str
    symptom: str
    stage: str
    cause_class: str
    operator: str
    first_seen_min: float
    hits: int
    signatures: int
    nodes: int
    reduced: bool
    state: str  # Finding.reduction_state
    known: bool
    report: str | None
    repro: str | None
    pictured: bool
    affects: str = ""  # the zoo architectures its pattern occurs in ("none"), where `convsmith report` computed it


def table_row(group: RootCauseGroup, pictured: bool, started: float, out_dir: Path, page_dir: Path,
              impact: Impact | None = None) -> Row:
    """The table's view of one root cause, first seen in minutes since the campaign started."""
    cause, rep = group.cause, group.representative
    title = _CONTROL.sub("", group.title)
    return Row(key=group.key, title=title, error=_CONTROL.sub("", cause.error_class) or title,
               converter=cause.converter, symptom=cause.symptom, stage=cause.stage, cause_class=cause.cause.value,
               operator=cause.shown_operator, first_seen_min=max(group.first_seen - started, 0.0) / 60, hits=group.hits,
               signatures=len(group.findings), nodes=rep.nodes, reduced=rep.reduced,
               state=rep.reduction_state, known=group.known,
               report=_link(out_dir, rep.case_dir, "report.md", page_dir),
               repro=_link(out_dir, rep.case_dir, "repro.py", page_dir), pictured=pictured,
               affects=impact.line().removeprefix("affects: ") if impact is not None else "")


def _link(out_dir: Path, case_dir: str | None, name: str, page_dir: Path) -> str | None:
    """A relative URL from the page's folder to a case file, so the campaign folder can be moved or served."""
    if case_dir is None or not (out_dir / case_dir / name).is_file():
        return None
    return quote(Path(os.path.relpath((out_dir / case_dir / name).absolute(), page_dir.absolute())).as_posix())
