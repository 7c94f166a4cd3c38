"""Each root cause's representative graph for the report page: inline SVG drawn by Graphviz, or DOT text where
Graphviz is missing, or a note saying why neither."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fuzzer.cases.case_head import read_case_head
from fuzzer.cases.case_json import CaseError
from fuzzer.triage.model import RootCauseGroup
from fuzzer.triage.rows import Row
from fuzzer.triage.svg import inline_svg
from generators.dot import to_dot

WIDE_PT = 420.0  # graphs wider than this (in points) would shrink to unreadable text in a grid card
NO_GRAPHVIZ = "Graphviz is not installed (apt-get install graphviz), so the graphs are shown as DOT text."
_SVG_WIDTH = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)pt"')


@dataclass(frozen=True)
class Picture:
    """A root cause's representative graph: inline SVG, or DOT text where Graphviz is missing, or why neither."""

    row: Row
    svg: str | None = None
    dot: str | None = None
    note: str | None = None
    wide: bool = False  # too wide for a card in the grid: it gets the page's whole width


def graph_picture(group: RootCauseGroup, row: Row, out_dir: Path, prefix: str) -> Picture:
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
    return Picture(row, svg=inline_svg(svg, prefix), wide=bool(width and float(width.group(1)) > WIDE_PT))


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
