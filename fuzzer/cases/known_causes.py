"""The root causes a folder of cases already holds (the regression corpus): each case's root-cause key, computed from
its case.json as a campaign's triage computes it, with the case's title and where it is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fuzzer.cases.case_head import root_cause_of
from fuzzer.cases.case_json import CASE_JSON


@dataclass(frozen=True)
class KnownCause:
    """A root cause already filed: its key, the title it was filed under, and the case that has it (`origin` says
    whose: a corpus case, a campaign's)."""

    key: str
    title: str
    where: Path
    origin: str = "corpus case"


def report_title(folder: Path) -> str:
    """The title of a case's report.md (its first line, a '# ' heading), "" where it has none."""
    try:
        with (folder / "report.md").open(encoding="utf-8") as report:
            first = report.readline()
    except OSError:
        return ""
    return first[2:].strip() if first.startswith("# ") else ""


def corpus_causes(corpus: Path) -> dict[str, KnownCause]:
    """The root causes of the cases in `corpus` (its folders holding a case.json), by key; the first case in name
    order stands for a key several cases share."""
    causes: dict[str, KnownCause] = {}
    if not corpus.is_dir():
        return causes
    for folder in sorted(p for p in corpus.iterdir() if (p / CASE_JSON).is_file()):
        cause = root_cause_of(folder)
        causes.setdefault(cause.key, KnownCause(cause.key, report_title(folder) or cause.title(), folder))
    return causes
