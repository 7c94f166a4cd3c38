"""Everything a person triaging a campaign looks at, as plain data: the headline, the root causes (new apart from
known), how finding them goes over time, tests per minute per converter, symptom x stage beside the study's
shares, and the operator sequences over-represented in failing graphs. `convsmith status` and `convsmith report`
both read this."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzzer.campaign import tallies
from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.rewrites import RewriteCoverage, coverage, upstream_split
from fuzzer.converters import CONVERTERS
from fuzzer.triage.findings import load_findings
from fuzzer.triage.grouping import corpus_keys, exporter_bugs, group
from fuzzer.triage.model import UNREDUCED, RootCauseGroup
from oracles.sequences import Enrichment, enrichment_of_counts, top

if TYPE_CHECKING:
    from fuzzer.triage.impact import Impact

# The published study of 200 ONNX converter failures: shares of symptoms and of the faulty stage.
STUDY_SYMPTOM_SHARES = {"crash": 0.56, "wrong model": 0.33, "other": 0.11}
STUDY_NODE_CONVERSION_SHARE = 0.74
HOUR_S = 3600.0
TIMELINE_BINS = 30


@dataclass(frozen=True)
class Headline:
    """The one line a person scans first."""

    tests: int
    tests_run: int  # tests whose own converter ran (not stopped by a failed source or upstream export)
    signatures: int
    root_causes: int
    new_root_causes: int  # not in the corpus
    known_root_causes: int
    new_last_hour: int
    unreduced: int  # root causes whose smallest case is not reduced yet (and reproduces alone)
    own_errors: int
    unreduced_cases: int = 0  # case folders (signatures) without their reduced case
    unpolished_cases: int = 0  # reduced by the shape-only step, not polished yet
    unreproduced_cases: int = 0  # whose own graph did not show their bug alone: no reduction can keep it

    def line(self) -> str:
        return (f"{self.root_causes} root causes ({self.new_root_causes} new, {self.known_root_causes} known; "
                f"{self.new_last_hour} first seen in the last hour) from {self.signatures} signatures; "
                f"{self.unreduced} root causes and {self.unreduced_cases} cases unreduced"
                f"{f' ({self.unpolished_cases} more not polished)' if self.unpolished_cases else ''}"
                f"{f', {self.unreproduced_cases} not reproduced alone' if self.unreproduced_cases else ''}; "
                f"{self.tests} tests ({self.tests_run} ran their converter); "
                f"{self.own_errors} own errors")


@dataclass(frozen=True)
class Triage:
    headline: Headline
    groups: tuple[RootCauseGroup, ...]
    timeline: tuple[tuple[float, int, int], ...]  # (minutes since start, signatures so far, root causes so far)
    rates: dict[str, tuple[tuple[float, float], ...]]  # converter -> (minute, tests in that minute)
    symptom_stage: dict[str, dict[str, int]]  # symptom -> stage -> bug tests
    sequences: tuple[Enrichment, ...]  # those over-represented in failing graphs at p <= 0.05
    started: float
    sequences_tested: int = 0  # sequences seen in at least two failing graphs
    rewrites: tuple[RewriteCoverage, ...] = ()  # each ONNX tool's rewrites and how often they fired
    exporter_split: dict[str, int] = field(default_factory=dict)  # tests per exporter model (fuzzer/campaign/rewrites)
    # Root cause key -> the zoo architectures its pattern occurs in (fuzzer/triage/impact.py); `convsmith report`'s.
    impacts: Mapping[str, Impact] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"headline": self.headline.__dict__,
                "root_causes": [{**g.to_json(), **self.impact_json(g.key)} for g in self.groups],
                "timeline": [list(t) for t in self.timeline],
                "tests_per_minute": {k: [list(p) for p in v] for k, v in self.rates.items()},
                "symptom_stage": self.symptom_stage, "sequences": [s.__dict__ for s in self.sequences],
                "sequences_tested": self.sequences_tested, "rewrites": [r.to_json() for r in self.rewrites],
                "exporter_split": self.exporter_split,
                "study": {"symptom_shares": STUDY_SYMPTOM_SHARES,
                          "node_conversion_share": STUDY_NODE_CONVERSION_SHARE}}

    def impact_json(self, key: str) -> dict[str, Any]:
        """{"impact": ...} of the root cause `key` where it was computed, else {}."""
        impact = self.impacts.get(key)
        return {"impact": impact.to_json()} if impact is not None else {}


def triage(out_dir: Path, db: CampaignDB, corpus: Path | None = None, now: float | None = None) -> Triage:
    """The triage of the campaign in `out_dir`; root causes the `corpus` already has are known."""
    findings = load_findings(out_dir, db)
    groups = tuple(group(findings, exporter_bugs(db, findings), corpus_keys(corpus) if corpus else ()))
    now = time.time() if now is None else now
    started = db.conn.execute("SELECT MIN(started) FROM sessions").fetchone()[0] or now
    cells = tallies.cells(db.conn)
    tests = sum(n for *_, n, _ in cells)
    stopped = sum(n for _, _, stage, n, _ in cells if stage == "source")
    headline = Headline(
        tests=tests, tests_run=tests - stopped, signatures=len(findings), root_causes=len(groups),
        new_root_causes=sum(not g.known for g in groups), known_root_causes=sum(g.known for g in groups),
        new_last_hour=sum(g.first_seen >= now - HOUR_S for g in groups),
        unreduced=sum(1 for g in groups if g.representative.case_dir and g.representative.reduction_state == UNREDUCED),
        own_errors=db.conn.execute("SELECT COUNT(*) FROM errors").fetchone()[0],
        unreduced_cases=sum(1 for f in findings if f.case_dir and f.reduction_state == UNREDUCED),
        unpolished_cases=sum(1 for f in findings if f.reduced and not f.polished),
        unreproduced_cases=sum(1 for f in findings if f.case_dir and f.reproduces is False))
    tested = _enrichment(db)
    return Triage(headline, groups, _timeline(groups, started), _rates(db), _symptom_stage(cells),
                  tuple(top(tested)), started, len(tested), tuple(coverage(db, CONVERTERS)),
                  upstream_split(db, CONVERTERS))


def _timeline(groups: tuple[RootCauseGroup, ...], started: float) -> tuple[tuple[float, int, int], ...]:
    """Cumulative signatures and root causes at each time one of them was first seen."""
    events = sorted([(f.first_seen, 0) for g in groups for f in g.findings] + [(g.first_seen, 1) for g in groups])
    signatures = causes = 0
    points = [(0.0, 0, 0)]
    for seen, is_cause in events:
        signatures += 1 - is_cause
        causes += is_cause
        points.append((max(seen - started, 0.0) / 60, signatures, causes))
    return tuple(points)


def _rates(db: CampaignDB) -> dict[str, tuple[tuple[float, float], ...]]:
    """Tests per minute of each converter, minute by minute since the campaign started (tests stopped upstream
    left out)."""
    counts: dict[str, Counter[int]] = {}
    for key, (n, _, _) in tallies.read(db.conn, tallies.Kind.MINUTE).items():
        converter, minute = key.rsplit("|", 1)
        counts.setdefault(converter, Counter())[int(minute)] += n
    return {c: tuple((float(m), float(n)) for m, n in sorted(per.items())) for c, per in sorted(counts.items())}


def _symptom_stage(cells: list[tuple[str, str, str, int, int]]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for _, symptom, stage, _, bugs in cells:
        if bugs:
            table.setdefault(symptom, {})[stage] = table.get(symptom, {}).get(stage, 0) + bugs
    return table


def _enrichment(db: CampaignDB) -> list[Enrichment]:
    """The operator sequences of the campaign's done graphs, over-represented or not in those with a failing test."""
    graphs, failing = tallies.read(db.conn, tallies.Kind.GRAPHS).get("all", (0, 0, 0.0))[:2]
    counts = {seq: (bugs, n - bugs) for seq, (n, bugs, _) in tallies.read(db.conn, tallies.Kind.SEQUENCE).items()}
    return enrichment_of_counts(counts, failing, graphs - failing)
