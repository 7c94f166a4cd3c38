"""SVG documents made fit to sit inline in one HTML page: no XML prolog, ids prefixed so that they do not clash."""

from __future__ import annotations

import re

_BEFORE_SVG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_ID_REFS = re.compile(r'(\bid="|href="#|url\(#)')


def inline_svg(svg: str, prefix: str) -> str:
    """An SVG document made fit to sit in HTML: no XML prolog, and ids prefixed so that pictures do not clash."""
    return _ID_REFS.sub(lambda m: m.group(1) + prefix, _BEFORE_SVG.sub("", svg, count=1))
