"""The report page's plots, drawn with matplotlib as inline SVG: findings over time, tests per minute of each
converter, and the campaign's symptoms and stages beside the published study's shares."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from fuzzer.support.errors import CannotRun
from fuzzer.triage.svg import inline_svg
from fuzzer.triage.view import STUDY_NODE_CONVERSION_SHARE, STUDY_SYMPTOM_SHARES, Triage
from oracles.verdict import Symptom

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WRONG_MODEL = Symptom.json_names(Symptom.divergences())
CRASH = Symptom.json_names(Symptom.crash_like())
NODE_CONVERSION = "node_conversion"
MAX_POINTS = 240  # points per converter in the throughput plot
INSTALL = "the report page needs the report extra: pip install -e '.[report]'"


def plots(triage: Triage) -> list[tuple[str, str]]:
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
    return inline_svg(buffer.getvalue(), prefix)


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
    full = int(_last_minute(rates))
    width = -(-(full + 1) // MAX_POINTS)  # minutes per point: a week is averaged over bins, not drawn minute by minute
    if width > 1:
        ax.set(xlabel=f"minutes since the campaign started (each point: the mean of {width} minutes)")
    marker = {"marker": "o", "markersize": 3} if full < MAX_POINTS else {}
    for converter, points in rates.items():
        minutes, counts = _binned(*_zero_filled(points, full), width)
        last = len(minutes) - 1
        line, = ax.plot(minutes[:last], counts[:last], linewidth=1.2, label=converter, **marker)
        # The campaign's last minute is partial (or still running): dashed, so its drop does not read as a stall.
        ax.plot(minutes[max(last - 1, 0):], counts[max(last - 1, 0):], linestyle="--", markerfacecolor="none",
                linewidth=1.0, color=line.get_color(), **marker)
    last = full
    ax.set_xlim(-0.3, max(last, 1) + 0.3)  # one minute of data would otherwise get a 0.01-wide axis
    ax.xaxis.get_major_locator().set_params(integer=True)
    if rates:
        ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=7, frameon=False, ncols=2)
    else:
        _note(ax, "no converter has run a test yet")


def _binned(minutes: list[float], counts: list[float], width: int) -> tuple[list[float], list[float]]:
    """Per bin of `width` minutes: its first minute and the mean tests per minute in it (the last bin may be
    shorter)."""
    if width <= 1:
        return minutes, counts
    starts = range(0, len(minutes), width)
    return ([minutes[i] for i in starts],
            [sum(counts[i:i + width]) / len(counts[i:i + width]) for i in starts])


def _zero_filled(points: Sequence[tuple[float, float]], last: int) -> tuple[list[float], list[float]]:
    """Every minute up to the campaign's `last`, zero where the converter finished no test (the view leaves
    those out)."""
    counts = {int(m): n for m, n in points}
    minutes = list(range(last + 1))
    return [float(m) for m in minutes], [counts.get(m, 0.0) for m in minutes]


def study_shares(symptom_stage: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, float], float, int]:
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
    shares, node, total = study_shares(symptom_stage)
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
