"""Findings grouped into root causes: the count users see.

Two rules beyond the root-cause key: a failure in a model that an ONNX-to-ONNX tool only received is the exporter's
where the case's blame says so (fuzzer/diagnosis/blame.py: the model before the tool fails alike, or ONNX's checker
rejects it), and joins the exporter's own root cause on that graph, filed once; and a root cause that a corpus case
already has is known, not new.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from fuzzer.campaign.db import CampaignDB
from fuzzer.cases.known_causes import corpus_causes
from fuzzer.converters.upstream import upstream_exporters
from fuzzer.triage.model import Finding, RootCauseGroup
from oracles.rootcause import RootCause

ExporterBugs = Mapping[tuple[int, str], str]  # (seed, exporter) -> the signature of its bug on that graph


def exporter_bugs(db: CampaignDB, findings: Sequence[Finding]) -> dict[tuple[int, str], str]:
    """The bug signature of the exporter test each ONNX tool's finding started from, by (seed, exporter)."""
    exporters = {c.name for c in upstream_exporters()}
    wanted = sorted({(f.seed, f.upstream) for f in findings if f.upstream in exporters})
    found: dict[tuple[int, str], str] = {}
    for seed, converter in wanted:
        row = db.conn.execute("SELECT signature FROM tests WHERE seed = ? AND converter = ? AND is_bug = 1",
                              (seed, converter)).fetchone()
        if row is not None:
            found[seed, converter] = row[0]
    return found


def group(findings: Sequence[Finding], exporters: ExporterBugs, known: Iterable[str] = ()) -> list[RootCauseGroup]:
    """Root causes, most hits first; `known` holds the keys of root causes the corpus already has."""
    by_signature = {f.signature: f for f in findings}
    members: dict[RootCause, list[Finding]] = defaultdict(list)
    for finding in findings:
        members[_attributed(finding, by_signature, exporters)].append(finding)
    known_keys = set(known)
    groups = [RootCauseGroup(cause, tuple(found), cause.key in known_keys) for cause, found in members.items()]
    return sorted(groups, key=lambda g: (-g.hits, g.key))


def _attributed(finding: Finding, by_signature: Mapping[str, Finding], exporters: ExporterBugs) -> RootCause:
    """The finding's own root cause; where its blame says the tool only received the exporter's fault (the model
    before the tool fails alike, or ONNX's checker rejects it), the root cause of the exporter's own test of the
    graph, and else one keyed by the exporter. The graph hitting an exporter bug elsewhere moves nothing."""
    own = finding.root_cause
    if not finding.upstream or finding.owner != finding.upstream:
        return own
    exporter_signature = exporters.get((finding.seed, finding.upstream))
    exporter = by_signature.get(exporter_signature) if exporter_signature else None
    return exporter.root_cause if exporter is not None else own


def corpus_keys(corpus: Path) -> set[str]:
    """The root-cause keys of the corpus's cases (a campaign reports matching findings as known)."""
    return set(corpus_causes(corpus))
