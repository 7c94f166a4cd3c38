"""A campaign's findings: one per bug signature, read from the database and the case folders (case.json only)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fuzzer.campaign.db import CampaignDB
from fuzzer.cases.case import case_id
from fuzzer.cases.case_head import read_case_head
from fuzzer.cases.case_json import CaseError, case_reproduces, reduced_folder
from fuzzer.cases.known_causes import report_title
from fuzzer.cases.report import display_name
from fuzzer.check.zoo import EVIDENCE_DIR, EVIDENCE_RECORD
from fuzzer.triage.model import Finding, quoted_error


def load_findings(out_dir: Path, db: CampaignDB) -> list[Finding]:
    """Every bug of the campaign in `out_dir`, from its reduced case where there is one."""
    rows = db.conn.execute("SELECT signature, symptom, stage, converter, count, first_seen, first_seed, case_dir "
                           "FROM bugs ORDER BY first_seen, signature").fetchall()
    findings = []
    for signature, symptom, stage, converter, count, first_seen, seed, case_dir in rows:
        base = Finding(signature, converter, stage, symptom, _message(db, signature), None, (), seed, count,
                       first_seen)
        case_dir = case_dir or _exporters_zoo_evidence(out_dir, signature)
        findings.append(finding_from_folder(out_dir, base, case_dir) if case_dir else base)
    return findings


def _exporters_zoo_evidence(out_dir: Path, signature: str) -> str | None:
    """An exporter's zoo finding's evidence folder, which its bug row does not name (the row's folder is what the
    campaign's reducer takes, and an exporter's zoo finding is not reduced); None where there is none."""
    folder = Path(EVIDENCE_DIR) / case_id(signature)
    return str(folder) if (out_dir / folder / EVIDENCE_RECORD).is_file() else None


def _message(db: CampaignDB, signature: str) -> str:
    """The message of one test that found the signature (through the index of bug tests by signature)."""
    row = db.conn.execute("SELECT message FROM tests WHERE is_bug = 1 AND signature = ? LIMIT 1", (signature,))
    found = row.fetchone()
    return found[0] if found else ""


def finding_from_folder(out_dir: Path, base: Finding, case_dir: str) -> Finding:
    """The finding of a bug row whose case (or zoo evidence) folder is `case_dir`: read from the reduced case where
    there is one."""
    folder = out_dir / case_dir
    reduced = reduced_folder(folder)
    chosen = reduced or folder
    try:
        head = read_case_head(chosen)
    except CaseError:  # a zoo finding's evidence folder, a case folder being written or damaged: the row alone
        return dataclasses.replace(base, case_dir=str(chosen.relative_to(out_dir)),
                                   filed_title=report_title(chosen) or zoo_title(chosen, base), owner=zoo_owner(chosen))
    graph, verdict = head.graph, head.verdict
    # The root cause is read from one verdict: the reduced case's (its stage and symptom with its message, which a
    # reduction to the defect behind a carried crash may change), else the row's.
    stage, symptom = (verdict.stage.value, verdict.symptom.json_name) if reduced else (base.stage, base.symptom)
    return Finding(
        base.signature, base.converter, stage, symptom, verdict.message or base.message,
        verdict.diverging_op, tuple(graph.ops()), base.seed, base.hits, base.first_seen,
        str(chosen.relative_to(out_dir)), reduced is not None, len(graph.nodes) or head.onnx_nodes,
        tuple(sorted({t.dtype.value for t in graph.types.values()})), head.options, head.options.get("upstream"),
        head.owner if head.owner != base.converter else None, head.polished, case_reproduces(folder, chosen),
        report_title(chosen))


def zoo_owner(folder: Path) -> str | None:
    """The shared component a zoo finding's blame names (its root cause's owner), else None."""
    try:
        blame = json.loads((folder / EVIDENCE_RECORD).read_text()).get("blame") or {}
    except (OSError, ValueError, AttributeError):
        return None
    return str(blame["component"]["key"]) if blame.get("shared") and blame.get("component") else None


def zoo_title(folder: Path, base: Finding) -> str:
    """A zoo finding's title where its folder has no report.md (written before it had one), naming the architecture
    it showed in ('torch.onnx.export (dynamo): crash at node conversion on zoo model `t5`: ValueError: ...'); ""
    where the folder has no zoo record."""
    try:
        record = json.loads((folder / EVIDENCE_RECORD).read_text())
    except (OSError, ValueError):
        return ""
    error = quoted_error(base.message) if base.message else ""
    return (f"{display_name(base.converter)}: {base.symptom.replace('_', ' ')} at {base.stage.replace('_', ' ')} "
            f"on zoo model `{record.get('entry', '?')}`" + (f": {error}" if error else ""))
