"""The terminal's view of a triage: the headline and one line per root cause, new before known."""

from __future__ import annotations

from fuzzer.triage.model import REDUCED
from fuzzer.triage.view import Triage

SHOWN = 25  # root causes listed in the terminal; the report page has them all


def format_triage(triage: Triage, shown: int = SHOWN) -> str:
    lines = [triage.headline.line()]
    new = [g for g in triage.groups if not g.known]
    known = [g for g in triage.groups if g.known]
    for title, groups in (("new root causes", new), ("known root causes (in the corpus)", known)):
        if not groups:
            continue
        lines.append(f"{title}:")
        for g in groups[:shown]:
            rep = g.representative
            state = "" if rep.reduction_state == REDUCED else f", {rep.reduction_state}"
            size = f"{rep.nodes} op{'' if rep.nodes == 1 else 's'}{state}"
            lines.append(f"  {g.hits:5d}x {g.cause.cause.value:<17} {g.title[:110]} [{size}]")
        if len(groups) > shown:
            lines.append(f"  ... {len(groups) - shown} more (convsmith report DIR writes them all)")
    return "\n".join(lines)
