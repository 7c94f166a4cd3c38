"""Which rewrites of the ONNX tools a campaign made fire: per tool, every rewrite the installed library has (read from
the library, so a new release's new rules show up as never fired), how many tests fired each, and how many of those
tests found a bug; and which exporter the tests started from (the split between the exporters)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fuzzer.campaign import tallies
from fuzzer.campaign.db import CampaignDB
from fuzzer.converters.base import Converter
from fuzzer.converters.role import Role


@dataclass(frozen=True)
class RewriteCoverage:
    """One tool's rewrites: those its library has, and per rewrite the tests that fired it and found a bug."""

    converter: str
    known: tuple[str, ...]  # empty where the library is not installed here
    fired: Mapping[str, int]
    failed: Mapping[str, int]

    @property
    def never_fired(self) -> tuple[str, ...]:
        return tuple(name for name in self.known if not self.fired.get(name))

    @property
    def share(self) -> float:
        """The share of the library's rewrites that fired at least once (0 when none are known)."""
        return (len(self.known) - len(self.never_fired)) / len(self.known) if self.known else 0.0

    def to_json(self) -> dict[str, Any]:
        names = list(dict.fromkeys((*self.known, *sorted(self.fired))))
        return {"converter": self.converter, "known": len(self.known), "fired_share": self.share,
                "rewrites": [{"name": n, "fired": self.fired.get(n, 0), "failed": self.failed.get(n, 0),
                              "known": n in self.known} for n in names]}


def fired_counts(db: CampaignDB) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per converter: tests that fired each rewrite, and how many of those were bugs."""
    found: dict[str, tuple[dict[str, int], dict[str, int]]] = defaultdict(lambda: ({}, {}))
    for (converter, name), (tests, bugs) in tallies.rewrite_counts(db.conn).items():
        found[converter][0][name] = tests
        found[converter][1][name] = bugs
    return dict(found)


def coverage(db: CampaignDB, converters: Mapping[str, Converter]) -> list[RewriteCoverage]:
    """Every converter that records rewrites (Converter.rewrite_names), with what the campaign fired."""
    counts = fired_counts(db)
    rows = []
    for name, converter in sorted(converters.items()):
        listed = converter.rewrite_names()
        if listed is None and name not in counts:
            continue
        known = (listed or ()) if converter.availability()[0] else ()
        fired, failed = counts.get(name, ({}, {}))
        rows.append(RewriteCoverage(name, tuple(known), fired, failed))
    return rows


def upstream_split(db: CampaignDB, converters: Mapping[str, Converter]) -> dict[str, int]:
    """Tests per exporter model: the exporters' own tests, and the ONNX tools' by the model they started from."""
    split = {key: n for key, (n, _, _) in tallies.read(db.conn, tallies.Kind.UPSTREAM).items()}
    for converter, _, _, n, _ in tallies.cells(db.conn):
        if converter in converters and converters[converter].role is Role.EXPORTER:
            split[converter] = split.get(converter, 0) + n
    return split


def format_coverage(rows: list[RewriteCoverage], split: Mapping[str, int]) -> list[str]:
    """status lines: each tool's share of rewrites fired, and the tests per exporter model."""
    lines = []
    for row in rows:
        if not row.known:
            lines.append(f"  {row.converter}: {len(row.fired)} rewrites fired (the library's list is not available)")
            continue
        bugs = sum(1 for name in row.fired if row.failed.get(name))
        lines.append(f"  {row.converter}: {len(row.known) - len(row.never_fired)} of {len(row.known)} rewrites "
                     f"fired ({row.share:.0%}), {bugs} of them in a test that found a bug")
    total = sum(split.values())
    if total:
        lines.append("tests by the exporter model they ran (the exporters' own and the ONNX tools' upstream): "
                     + ", ".join(f"{name} {n / total:.0%}" for name, n in sorted(split.items(), key=lambda kv: -kv[1])))
    head = ["rewrites of the ONNX tools fired (`convsmith ops --coverage DIR` lists each):"] if rows else []
    return head + lines
