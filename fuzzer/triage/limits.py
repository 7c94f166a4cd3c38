"""A converter's limits: the clean "not supported" answers its tests ended in (a documented refusal, an opset without
the dtype, an operator it has no translation for), counted per converter and kind of refusal. They are what the
converter says it cannot do, not defects, so they are listed apart from root causes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzzer.campaign.db import CampaignDB
from oracles.rootcause import error_class
from oracles.verdict import Stage, Symptom

SHOWN_KINDS = 3  # of each converter's limits, in status's text


@dataclass(frozen=True)
class Limit:
    """One kind of refusal of one converter: its normalized message and how many tests ended in it."""

    converter: str
    refusal: str
    tests: int

    def to_json(self) -> dict[str, Any]:
        return {"converter": self.converter, "refusal": self.refusal, "tests": self.tests}


def limits(db: CampaignDB) -> list[Limit]:
    """The refusals the converters themselves gave (tests skipped before running, at the source, are not theirs),
    most frequent first within each converter."""
    rows = db.conn.execute("SELECT converter, message FROM tests WHERE symptom = ? AND stage != ?",
                           (Symptom.UNSUPPORTED.json_name, Stage.SOURCE.value)).fetchall()
    counts: dict[tuple[str, str], int] = {}
    for converter, message in rows:
        key = (converter, error_class(message))
        counts[key] = counts.get(key, 0) + 1
    found = [Limit(c, r, n) for (c, r), n in counts.items()]
    return sorted(found, key=lambda lim: (lim.converter, -lim.tests, lim.refusal))


def format_limits(found: list[Limit], shown: int = SHOWN_KINDS) -> list[str]:
    """status's lines: per converter, its refusals (the most frequent few, each with its count)."""
    if not found:
        return []
    lines = ["limits (each converter's clean refusals: not bugs, not root causes):"]
    for converter in sorted({lim.converter for lim in found}):
        mine = [lim for lim in found if lim.converter == converter]
        total = sum(lim.tests for lim in mine)
        lines.append(f"  {converter}: {total} tests in {len(mine)} kinds of refusal")
        lines += [f"      {lim.tests}x {lim.refusal[:110]}" for lim in mine[:shown]]
    return lines
