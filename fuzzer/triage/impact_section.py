"""The section of a case's report.md that says which real architectures its root cause affects, written (and
rewritten, in place) by `convsmith report`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fuzzer.support.files import atomic_write_text

if TYPE_CHECKING:
    from fuzzer.triage.impact import Impact

HEADING = "## Real architectures with this pattern"
REPORT = "report.md"


def impact_section(impact: Impact, nodes: int) -> str:
    """The section's text: the case's size beside the architectures affected, the pattern and where it was read."""
    found = f"Found in a case of {nodes} operator{'' if nodes == 1 else 's'}; {impact.line()}."
    lines = [HEADING, "", found]
    if impact.pattern:
        lines += ["", f"Its pattern (from {impact.origin}; operators, the int and string attributes that select their "
                  f"behaviour, input dtypes, and the edges between them): `{impact.pattern}`."]
    if impact.affected:
        lines += ["", "Converted models of the zoo (seed 0, small sizes) holding it:", ""]
        lines += [f"- {entry}: {', '.join(exporters)}" for entry, exporters in impact.affected.items()]
    if impact.operator and impact.operator_affected and impact.operator != impact.pattern:
        lines += ["", f"Converted models holding its `{impact.operator}` alone (same attributes and dtypes):", ""]
        lines += [f"- {entry}: {', '.join(exporters)}" for entry, exporters in impact.operator_affected.items()]
    return "\n".join(lines) + "\n"


def with_impact_section(text: str, section: str) -> str:
    """`text` with its impact section replaced by `section` (appended where it has none)."""
    start = text.find(HEADING)
    if start < 0:
        return text.rstrip("\n") + "\n\n" + section
    end = text.find("\n## ", start + len(HEADING))
    rest = text[end + 1:] if end >= 0 else ""
    return text[:start] + section + ("\n" + rest if rest else "")


def add_impact_section(case_dir: Path, impact: Impact, nodes: int) -> None:
    """Write the impact section into the case's report.md (none is written where the case has no report)."""
    report = case_dir / REPORT
    if report.is_file():
        text = report.read_text(encoding="utf-8")
        atomic_write_text(report, with_impact_section(text, impact_section(impact, nodes)))
