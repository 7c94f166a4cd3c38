"""The report page of a campaign: one self-contained HTML file (the headline, the root causes in a sortable table,
each one's graph as a picture, plots of the campaign, operator sequences) that `convsmith report DIR` writes.

Everything is inline (SVG, CSS, a few lines of script), so the file can be mailed or attached to an issue.
jinja2, matplotlib and graphviz (the `report` extra) are imported when a page is written, so the other commands
run without them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from fuzzer.support.errors import CannotRun
from fuzzer.support.files import atomic_write_text
from fuzzer.triage.pictures import NO_GRAPHVIZ, graph_picture
from fuzzer.triage.plots import INSTALL, plots
from fuzzer.triage.rows import table_row
from fuzzer.triage.view import Triage

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup

TEMPLATE = "report.html.j2"
MAX_PICTURES = 50  # graph pictures beyond these make the page slow to write and to scroll
SUMMARY = (("root causes", "root_causes"), ("new", "new_root_causes"), ("known", "known_root_causes"),
           ("new in the last hour", "new_last_hour"), ("signatures", "signatures"), ("unreduced", "unreduced"),
           ("tests", "tests"), ("ran their converter", "tests_run"), ("own errors", "own_errors"))


def write_page(triage: Triage, out_dir: Path, page: Path) -> Path:
    """Write the report page of the campaign in `out_dir` to `page` (atomically) and return it."""
    environment = _environment()
    groups = sorted(triage.groups, key=lambda g: g.known)  # stable: new first, each part most hits first
    out_dir, page = Path(out_dir), Path(page)
    rows = [table_row(g, i < MAX_PICTURES, triage.started, out_dir, page.parent, triage.impacts.get(g.key))
            for i, g in enumerate(groups)]
    pictures = [graph_picture(g, row, out_dir, f"g{i}-") for i, (g, row) in enumerate(zip(groups, rows))
                if row.pictured]
    html = environment.get_template(TEMPLATE).render(
        headline=triage.headline.line(), summary=[(label, getattr(triage.headline, name)) for label, name in SUMMARY],
        rows=rows, pictures=pictures, unpictured=len(rows) - len(pictures), max_pictures=MAX_PICTURES,
        no_graphviz=any(p.dot is not None for p in pictures), no_graphviz_line=NO_GRAPHVIZ, plots=plots(triage),
        stages=sorted({s for per in triage.symptom_stage.values() for s in per}),
        symptom_stage=dict(sorted(triage.symptom_stage.items())), sequences=triage.sequences,
        sequences_tested=triage.sequences_tested, rewrites=triage.rewrites,
        exporter_split=sorted(triage.exporter_split.items(), key=lambda kv: -kv[1]),
        split_total=sum(triage.exporter_split.values()),
        impacts=bool(triage.impacts), campaign=out_dir.name, started=_clock(triage.started),
        written=_clock(time.time()))
    atomic_write_text(page, html)
    return page


def _environment() -> Environment:
    """The jinja2 environment over this module's folder, autoescaping everything (messages hold '<', '&')."""
    try:
        import jinja2
    except ImportError:
        raise CannotRun(INSTALL) from None
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                                     undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    environment.filters["breakable"] = _breakable
    return environment


def _breakable(text: str) -> Markup:
    """Escaped text that may wrap after each underscore: 'runtime_execution' need not widen a narrow column."""
    from markupsafe import Markup, escape

    return Markup("_<wbr>").join(escape(part) for part in str(text).split("_"))


def _clock(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
