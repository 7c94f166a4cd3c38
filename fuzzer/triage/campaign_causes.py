"""A campaign's root causes as known ones, for `convsmith check MODEL --campaign DIR`: each keyed and titled as
`convsmith status` groups them, found at its representative case."""

from __future__ import annotations

from pathlib import Path

from fuzzer.campaign.db import open_campaign
from fuzzer.cases.known_causes import KnownCause
from fuzzer.triage.findings import load_findings
from fuzzer.triage.grouping import exporter_bugs, group


def campaign_causes(out_dir: Path) -> dict[str, KnownCause]:
    """The root causes of the campaign in `out_dir`, by key (a UsageError where it holds no campaign)."""
    db = open_campaign(out_dir)
    try:
        findings = load_findings(out_dir, db)
        groups = group(findings, exporter_bugs(db, findings))
    finally:
        db.close()
    return {g.key: KnownCause(g.key, g.title, out_dir / (g.representative.case_dir or ""), "campaign case")
            for g in groups}
