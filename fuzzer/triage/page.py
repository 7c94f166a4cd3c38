"""The report page of a campaign: one self-contained HTML file (the headline, the root causes in a sortable table,
each one's graph as a picture, plots of the campaign, operator sequences) that `convsmith report DIR` writes.

Everything is inline (SVG, CSS, a few lines of script), so the file can be mailed or attached to an issue.
jinja2, matplotlib and graphviz (the `report` extra) are imported when a page is written, so the other commands
run without them.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from fuzzer.cases.folder import CaseError, read_case_head
from fuzzer.support.errors import CannotRun
from fuzzer.support.files import atomic_write_text
from fuzzer.triage.model import RootCauseGroup
from fuzzer.triage.view import STUDY_NODE_CONVERSION_SHARE, STUDY_SYMPTOM_SHARES, Triage
from generators.dot import to_dot

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TEMPLATE = "report.html.j2"
MAX_PICTURES = 50  # graph pictures beyond these make the page slow to write and to scroll
WIDE_PT = 420.0  # graphs wider than this (in points) would shrink to unreadable text in a grid card
WRONG_MODEL = ("wrong_values", "wrong_shape", "wrong_dtype")
CRASH = ("crash", "process_death", "hang", "out_of_memory", "invalid_model")
NODE_CONVERSION = "node_conversion"
NO_GRAPHVIZ = "Graphviz is not installed (apt-get install graphviz), so the graphs are shown as DOT text."
INSTALL = "the report page needs the report extra: pip install -e '.[report]'"
SUMMARY = (("root causes", "root_causes"), ("new", "new_root_causes"), ("known", "known_root_causes"),
           ("new in the last hour", "new_last_hour"), ("signatures", "signatures"), ("unreduced", "unreduced"),
           ("tests", "tests"), ("ran their converter", "tests_run"), ("own errors", "own_errors"))
_BEFORE_SVG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_ID_REFS = re.compile(r'(\bid="|href="#|url\(#)')
_SVG_WIDTH = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)pt"')
# Terminal colour codes (numbers already normalised to <n>) and other control characters some exporters print.
_CONTROL = re.compile(r"\x1b\[[0-9;<>n]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class Row:
    """One root cause as the table shows it; links are relative to the page's folder (None: no such file)."""

    key: str
    title: str
    error: str  # the error class, or the title where there is none (a wrong model): what the table shows
    converter: str
    symptom: str
    stage: str
    cause_class: str
    operator: str
    first_seen_min: float
    hits: int
    signatures: int
    nodes: int
    reduced: bool
    known: bool
    report: str | None
    repro: str | None
    pictured: bool


@dataclass(frozen=True)
class Picture:
    """A root cause's representative graph: inline SVG, or DOT text where Graphviz is missing, or why neither."""

    row: Row
    svg: str | None = None
    dot: str | None = None
    note: str | None = None
    wide: bool = False  # too wide for a card in the grid: it gets the page's whole width


def write_page(triage: Triage, out_dir: Path, page: Path) -> Path:
    """Write the report page of the campaign in `out_dir` to `page` (atomically) and return it."""
    environment = _environment()
    groups = sorted(triage.groups, key=lambda g: g.known)  # stable: new first, each part most hits first
    rows = [_row(g, i < MAX_PICTURES, triage.started, Path(out_dir), Path(page).parent) for i, g in enumerate(groups)]
    pictures = [_picture(g, row, Path(out_dir), f"g{i}-") for i, (g, row) in enumerate(zip(groups, rows))
                if row.pictured]
    html = environment.get_template(TEMPLATE).render(
        headline=triage.headline.line(), summary=[(label, getattr(triage.headline, name)) for label, name in SUMMARY],
        rows=rows, pictures=pictures, unpictured=len(rows) - len(pictures), max_pictures=MAX_PICTURES,
        no_graphviz=any(p.dot is not None for p in pictures), no_graphviz_line=NO_GRAPHVIZ, plots=_plots(triage),
        stages=sorted({s for per in triage.symptom_stage.values() for s in per}),
        symptom_stage=dict(sorted(triage.symptom_stage.items())), sequences=triage.sequences,
        sequences_tested=triage.sequences_tested, rewrites=triage.rewrites,
        exporter_split=sorted(triage.exporter_split.items(), key=lambda kv: -kv[1]),
        split_total=sum(triage.exporter_split.values()),
        campaign=Path(out_dir).name, started=_clock(triage.started), written=_clock(time.time()))
    atomic_write_text(Path(page), html)
    return Path(page)


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


def _row(group: RootCauseGroup, pictured: bool, started: float, out_dir: Path, page_dir: Path) -> Row:
    """The table's view of one root cause, first seen in minutes since the campaign started."""
    cause, rep = group.cause, group.representative
    title = _CONTROL.sub("", cause.title())
    return Row(key=group.key, title=title, error=_CONTROL.sub("", cause.error_class) or title,
               converter=cause.converter, symptom=cause.symptom, stage=cause.stage, cause_class=cause.cause.value,
               operator=cause.shown_operator, first_seen_min=max(group.first_seen - started, 0.0) / 60, hits=group.hits,
               signatures=len(group.findings), nodes=rep.nodes, reduced=rep.reduced, known=group.known,
               report=_link(out_dir, rep.case_dir, "report.md", page_dir),
               repro=_link(out_dir, rep.case_dir, "repro.py", page_dir), pictured=pictured)


def _link(out_dir: Path, case_dir: str | None, name: str, page_dir: Path) -> str | None:
    """A relative URL from the page's folder to a case file, so the campaign folder can be moved or served."""
    if case_dir is None or not (out_dir / case_dir / name).is_file():
        return None
    return quote(Path(os.path.relpath((out_dir / case_dir / name).absolute(), page_dir.absolute())).as_posix())


def _picture(group: RootCauseGroup, row: Row, out_dir: Path, prefix: str) -> Picture:
    """The representative case's graph drawn by Graphviz; a note (never an exception) when it cannot be."""
    case_dir = group.representative.case_dir
    if case_dir is None:
        return Picture(row, note="no case folder was written for this root cause")
    try:
        dot = to_dot(read_case_head(out_dir / case_dir).graph)
    except CaseError as exc:  # a live campaign may be rewriting the folder; the page still gets out
        return Picture(row, note=f"the case cannot be read: {exc}")
    try:
        svg = _graph_svg(dot)
    except RuntimeError as exc:  # graphviz's CalledProcessError: `dot` rejected the text
        return Picture(row, note=f"Graphviz failed: {exc}")
    if svg is None:
        return Picture(row, dot=dot)
    width = _SVG_WIDTH.search(svg)
    return Picture(row, svg=_inline(svg, prefix), wide=bool(width and float(width.group(1)) > WIDE_PT))


def _graph_svg(dot: str) -> str | None:
    """SVG text of a DOT graph; None where the graphviz package or its `dot` binary is missing."""
    try:
        import graphviz
    except ImportError:
        return None
    # to_dot sets the nodes' font only; edge labels would fall back to Times, larger than the boxes' text.
    dot = dot.replace("{\n", "{\n  edge [fontname=\"Helvetica\", fontsize=9];\n", 1)
    try:
        return graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        return None
    except graphviz.CalledProcessError as exc:
        raise RuntimeError(str(exc).splitlines()[0]) from None


def _inline(svg: str, prefix: str) -> str:
    """An SVG document made fit to sit in HTML: no XML prolog, and ids prefixed so that pictures do not clash."""
    return _ID_REFS.sub(lambda m: m.group(1) + prefix, _BEFORE_SVG.sub("", svg, count=1))


def _plots(triage: Triage) -> list[tuple[str, str]]:
    """(caption, inline SVG) of each plot: finding over time, tests per minute, symptoms and stages vs the study."""
    return [
        ("Signatures and root causes found so far: flat lines at the right mean the campaign is saturating.",
         _figure_svg(lambda fig: _draw_timeline(fig, triage.timeline, _last_minute(triage.rates)), "p0-")),
        ("Tests per minute of each converter (the last minute of a live campaign is partial).",
         _figure_svg(lambda fig: _draw_rates(fig, triage.rates), "p1-")),
        ("Bug tests by symptom and by stage, beside the shares of the published study of ONNX converter failures.",
         _figure_svg(lambda fig: _draw_study(fig, triage.symptom_stage), "p2-")),
    ]


def _figure_svg(draw: Callable[[Figure], None], prefix: str) -> str:
    """Draw on a fresh figure and return it as inline SVG (text kept as text: smaller and searchable)."""
    try:
        from matplotlib import rc_context
        from matplotlib.figure import Figure
    except ImportError:
        raise CannotRun(INSTALL) from None
    # A bare Figure, not pyplot: no GUI backend, no global figure registry, nothing left behind in the process.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": prefix, "font.size": 9,
                     "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False}):
        figure = Figure(figsize=(6.4, 3.4), layout="constrained")
        draw(figure)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return _inline(buffer.getvalue(), prefix)


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#777777")


def _last_minute(rates: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """The start of the last minute any test finished in: how far the campaign has surely run (the lines stop
    short rather than claim a flat stretch that did not happen)."""
    return max((m for points in rates.values() for m, _ in points), default=0.0)


def _time_axis(end_min: float) -> tuple[float, str]:
    """Minutes are scaled by the first, labelled by the second: seconds for a short run, hours for a long one."""
    if end_min < 2:
        return 60.0, "seconds since the campaign started"
    if end_min > 180:
        return 1 / 60, "hours since the campaign started"
    return 1.0, "minutes since the campaign started"


def _draw_timeline(fig: Figure, timeline: Sequence[tuple[float, int, int]], end: float) -> None:
    ax = fig.subplots()
    points = list(timeline) or [(0.0, 0, 0)]
    points.append((max(end, points[-1][0]), points[-1][1], points[-1][2]))  # flat up to now: the saturation cue
    scale, label = _time_axis(points[-1][0])
    times = [p[0] * scale for p in points]
    ax.step(times, [p[1] for p in points], where="post", label="signatures", color="#4c72b0")
    ax.step(times, [p[2] for p in points], where="post", label="root causes", color="#dd8452")
    ax.set(xlabel=label, ylabel="found so far", title="Found over time")
    ax.set_xlim(0, max(times[-1], 1.0))
    ax.set_ylim(0, max(points[-1][1], 1) * 1.08)  # an empty campaign gets 0..1, not matplotlib's 0..0.05
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left", frameon=False)
    if points[-1][1] == 0:
        _note(ax, "nothing found yet")


def _draw_rates(fig: Figure, rates: Mapping[str, Sequence[tuple[float, float]]]) -> None:
    ax = fig.subplots()
    ax.set(xlabel="minutes since the campaign started", ylabel="tests per minute", title="Throughput per converter")
    last = int(_last_minute(rates))
    for converter, points in rates.items():
        minutes, counts = _zero_filled(points, last)
        line, = ax.plot(minutes[:last], counts[:last], marker="o", markersize=3, linewidth=1.2, label=converter)
        # The campaign's last minute is partial (or still running): dashed, so its drop does not read as a stall.
        ax.plot(minutes[max(last - 1, 0):], counts[max(last - 1, 0):], linestyle="--", marker="o", markersize=3,
                markerfacecolor="none", linewidth=1.0, color=line.get_color())
    ax.set_xlim(-0.3, max(last, 1) + 0.3)  # one minute of data would otherwise get a 0.01-wide axis
    ax.xaxis.get_major_locator().set_params(integer=True)
    if rates:
        ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=7, frameon=False, ncols=2)
    else:
        _note(ax, "no converter has run a test yet")


def _zero_filled(points: Sequence[tuple[float, float]], last: int) -> tuple[list[float], list[float]]:
    """Every minute up to the campaign's `last`, zero where the converter finished no test (the view leaves
    those out)."""
    counts = {int(m): n for m, n in points}
    minutes = list(range(last + 1))
    return [float(m) for m in minutes], [counts.get(m, 0.0) for m in minutes]


def _study_shares(symptom_stage: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, float], float, int]:
    """The campaign's shares of bug tests per study symptom (crash, wrong model, other), its share found at node
    conversion, and the number of bug tests."""
    total = sum(n for per in symptom_stage.values() for n in per.values())
    counts = {"crash": 0, "wrong model": 0, "other": 0}
    for symptom, per in symptom_stage.items():
        counts["crash" if symptom in CRASH else "wrong model" if symptom in WRONG_MODEL else "other"] += sum(
            per.values())
    node = sum(per.get(NODE_CONVERSION, 0) for per in symptom_stage.values())
    return {k: v / total if total else 0.0 for k, v in counts.items()}, node / total if total else 0.0, total


def _draw_study(fig: Figure, symptom_stage: Mapping[str, Mapping[str, int]]) -> None:
    shares, node, total = _study_shares(symptom_stage)
    left, right = fig.subplots(1, 2, width_ratios=(3, 2), sharey=True)
    _bars(left, list(STUDY_SYMPTOM_SHARES), [shares[k] for k in STUDY_SYMPTOM_SHARES],
          list(STUDY_SYMPTOM_SHARES.values()), "symptom")
    _bars(right, ["node conversion", "other stages"], [node, 1 - node if total else 0.0],
          [STUDY_NODE_CONVERSION_SHARE, 1 - STUDY_NODE_CONVERSION_SHARE], "stage")
    left.set_ylabel("share of bug tests")
    left.set_ylim(0, 1.12)
    left.legend(loc="upper right", fontsize=7, frameon=False)
    fig.suptitle(f"This campaign ({total} bug tests) beside the study (200 failures)", fontsize=10)
    if not total:
        _note(left, "no bug tests yet")


def _bars(ax: Axes, labels: list[str], campaign: list[float], study: list[float], title: str) -> None:
    """Campaign and study shares side by side, each bar labelled with its percentage."""
    xs = range(len(labels))
    ours = ax.bar([x - 0.2 for x in xs], campaign, width=0.4, label="this campaign", color="#4c72b0")
    theirs = ax.bar([x + 0.2 for x in xs], study, width=0.4, label="study", color="#bbbbbb")
    for bars in (ours, theirs):
        ax.bar_label(bars, labels=[f"{v:.0%}" for v in bars.datavalues], fontsize=7, padding=2)
    ax.set_xticks(list(xs), labels)
    ax.set_title(f"by {title}", fontsize=9)
