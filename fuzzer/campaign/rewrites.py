"""Which rewrites of the ONNX tools a campaign made fire: per tool, every rewrite the installed library has (read from
the library, so a new release's new rules show up as never fired), how many tests fired each, and how many of those
tests found a bug; and which exporter the tests started from (the split between the exporters)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzzer.campaign import tallies
from fuzzer.campaign.class_coverage import ClassCoverage, attempts, bug_classes, class_counts, class_coverage
from fuzzer.campaign.db import CampaignDB
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import RecordsRewrites, RewriteReach, classes_out_of_reach
from fuzzer.converters.role import Role


@dataclass(frozen=True)
class RewriteCoverage:
    """One tool's rewrites: those its library has, and per rewrite the tests that fired it and found a bug; those
    that cannot fire in this campaign (on this device, or under the options it draws; with why) are left out of the
    shares."""

    converter: str
    known: tuple[str, ...]  # empty where the library is not installed here
    fired: Mapping[str, int]
    failed: Mapping[str, int]
    out_of_reach: Mapping[str, str] = field(default_factory=dict)
    beyond_float: frozenset[str] = frozenset()  # rewrites only quantized or integer graphs give anything to do
    pairs: ClassCoverage = field(default_factory=ClassCoverage)  # (rewrite, edge-case class) pairs

    @property
    def reachable(self) -> tuple[str, ...]:
        return tuple(name for name in self.known if name not in self.out_of_reach)

    @property
    def never_fired(self) -> tuple[str, ...]:
        """The reachable rewrites no test fired."""
        return tuple(name for name in self.reachable if not self.fired.get(name))

    @property
    def share(self) -> float:
        """The share of the reachable rewrites that fired at least once (0 when none are known)."""
        return _share(self.reachable, self.fired)

    @property
    def float_rewrites(self) -> tuple[str, ...]:
        return tuple(name for name in self.reachable if name not in self.beyond_float)

    @property
    def float_share(self) -> float:
        """The share of the reachable rewrites for float graphs that fired at least once."""
        return _share(self.float_rewrites, self.fired)

    def to_json(self) -> dict[str, Any]:
        names = list(dict.fromkeys((*self.known, *sorted(self.fired))))
        return {"converter": self.converter, "known": len(self.known), "reachable": len(self.reachable),
                "fired_share": self.share, "float_share": self.float_share,
                "rewrites": [{"name": n, "fired": self.fired.get(n, 0), "failed": self.failed.get(n, 0),
                              "known": n in self.known, "out_of_reach": self.out_of_reach.get(n, ""),
                              "beyond_float": n in self.beyond_float, "classes": list(self.pairs.of_rewrite(n)[0]),
                              "classes_never": list(self.pairs.of_rewrite(n)[1])} for n in names],
                "pairs": self.pairs.to_json()}

    def summary(self) -> str:
        """'N of M rewrites fired (P%)', with the float graphs' share where the tool has rewrites for others."""
        fired = len(self.reachable) - len(self.never_fired)
        text = f"{fired} of {len(self.reachable)} rewrites fired ({self.share:.0%})"
        if self.beyond_float:
            floats = self.float_rewrites
            text += (f"; for float graphs {sum(1 for n in floats if self.fired.get(n))} of {len(floats)} "
                     f"({self.float_share:.0%})")
        if self.out_of_reach:
            text += f"; {len(self.out_of_reach)} more cannot fire in this campaign"
        if self.pairs.rewrites:
            text += f"; {self.pairs.summary()}"
        return text


def _share(names: tuple[str, ...], fired: Mapping[str, int]) -> float:
    return sum(1 for name in names if fired.get(name)) / len(names) if names else 0.0


def fired_counts(db: CampaignDB) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per converter: tests that fired each rewrite, and how many of those were bugs."""
    found: dict[str, tuple[dict[str, int], dict[str, int]]] = defaultdict(lambda: ({}, {}))
    for (converter, name), (tests, bugs) in tallies.rewrite_counts(db.conn).items():
        found[converter][0][name] = tests
        found[converter][1][name] = bugs
    return dict(found)


def coverage(db: CampaignDB, converters: Mapping[str, Converter], device: str = "cpu") -> list[RewriteCoverage]:
    """Every converter the campaign tested that records rewrites (capabilities.RecordsRewrites), with what the campaign
    fired on `device`."""
    counts, classes, tried, named = fired_counts(db), class_counts(db.conn), attempts(db.conn), bug_classes(db.conn)
    tests: dict[str, int] = defaultdict(int)
    for converter, _, _, n, _ in tallies.cells(db.conn):
        tests[converter] += n
    tested = set(tests)
    rows = []
    for name, converter in sorted(converters.items()):
        if name not in counts and name not in tested:
            continue  # a tool the campaign never ran: its library's list (some tools run it to read it) is not asked
        if not isinstance(converter, RecordsRewrites) and name not in counts:
            continue
        known = converter.rewrite_names() if isinstance(converter, RecordsRewrites) and converter.availability()[0] \
            else ()
        fired, failed = counts.get(name, ({}, {}))
        out: Mapping[str, str] = {}
        beyond: frozenset[str] = frozenset()
        if isinstance(converter, RewriteReach) and known:
            out = {n: why for n, why in converter.rewrites_out_of_reach(device).items() if n in known}
            beyond = converter.rewrites_beyond_float()
        reachable = tuple(n for n in known if n not in out) if known else tuple(sorted(fired))
        # The ONNX tools record the classes of what they matched; an exporter's own optimizer replay does not.
        pairs = class_coverage(reachable, classes.get(name, {}), classes_out_of_reach(converter),
                               tried.get(name, {}), tests[name], named.get(name)) \
            if converter.role is Role.ONNX_TOOL else ClassCoverage()
        rows.append(RewriteCoverage(name, tuple(known), fired, failed, out, beyond, pairs))
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
        lines.append(f"  {row.converter}: {row.summary()}; {bugs} fired in a test that found a bug")
    total = sum(split.values())
    if total:
        lines.append("tests by the exporter model they ran (the exporters' own and the ONNX tools' upstream): "
                     + ", ".join(f"{name} {n / total:.0%}" for name, n in sorted(split.items(), key=lambda kv: -kv[1])))
    head = ["rewrites of the ONNX tools fired (`convsmith ops --coverage DIR` lists each):"] if rows else []
    return head + lines
