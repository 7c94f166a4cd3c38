"""The README and docs/ hold together: every relative link names a file that exists and, with a #anchor, a heading
of that file (GitHub's slug rules); every http(s) link is well formed; the README stays one page (1,000 words)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_WORDS = 1000

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1", re.DOTALL)
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(text: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """(line number, line) with fenced code blocks blanked out, and inline code spans (which may run over a line
    break) too unless `code_spans`: what they hold is no link, but a heading's slug keeps their text."""
    lines, fenced = [], False
    for line in text.splitlines():
        fence = bool(_FENCE.match(line))
        lines.append("" if fence or fenced else line)
        fenced ^= fence
    prose = "\n".join(lines)
    if not code_spans:
        prose = _CODE_SPAN.sub(lambda span: "\n" * span.group(0).count("\n"), prose)
    return list(enumerate(prose.split("\n"), start=1))


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link of a Markdown file: inline, reference definitions, autolinks."""
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        targets = _INLINE_LINK.findall(line) + _AUTOLINK.findall(line)
        definition = _REFERENCE_DEF.match(line)
        if definition:
            targets.append(definition.group(1))
        found.extend((number, target) for target in targets)
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: Markdown emphasis, code marks and link targets dropped, lowercase, punctuation
    other than hyphens and underscores removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 ... for repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8"), code_spans=True):
        heading = _HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(path: Path) -> list[str]:
    """'file:line: target (why)' for each relative link of `path` that does not resolve."""
    broken = []
    for number, target in links(path):
        if _EXTERNAL.match(target):
            continue
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{where} (no heading with anchor #{anchor})")
        elif anchor and linked.is_dir():
            broken.append(f"{where} (an anchor into a folder)")
    return broken


def malformed_external_links(path: Path) -> list[str]:
    """'file:line: target' for each http(s) link of `path` without a host, or with spaces or another scheme's form."""
    bad = []
    for number, target in links(path):
        scheme = target.split(":", 1)[0].lower()
        if not _EXTERNAL.match(target) or scheme not in ("http", "https"):
            continue
        parts = urlsplit(target)
        if not parts.netloc or not target.startswith(f"{parts.scheme}://") or re.search(r"\s", target):
            bad.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    return bad


def test_readme_is_one_page() -> None:
    words = len(README.read_text(encoding="utf-8").split())  # as `wc -w` counts
    assert words <= README_WORDS, f"README.md has {words} words; at most {README_WORDS}: move detail into docs/"


def test_docs_exist_beside_the_readme() -> None:
    files = markdown_files()
    assert len(files) > 1 and all(f.is_file() for f in files)


def test_every_relative_link_resolves() -> None:
    broken = [entry for path in markdown_files() for entry in broken_links(path)]
    assert broken == [], "broken links:\n" + "\n".join(broken)


def test_every_external_link_is_well_formed() -> None:
    bad = [entry for path in markdown_files() for entry in malformed_external_links(path)]
    assert bad == [], "malformed links:\n" + "\n".join(bad)


def test_the_readme_links_every_docs_page() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in links(README)}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert sorted(p.name for p in pages - linked) == []


@pytest.mark.parametrize(("heading", "expected"), [
    ("Rewrite coverage and steering", "rewrite-coverage-and-steering"),
    ("pybind_internals.py", "pybind_internalspy"),
    ("promote and the corpus", "promote-and-the-corpus"),
    ("What lands in `bugs/`", "what-lands-in-bugs"),
    ("Exit statuses (0-4)", "exit-statuses-0-4"),
    ("A [linked](x.md) *heading*", "a-linked-heading"),
])
def test_slugs_follow_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_the_checker_names_each_broken_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Title\n\n## Same\n\n## Same\n\n## In `code/`\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md) [ok](other.md#title) [ok](other.md#same-1) [ok](#here) [ok](other.md#in-code)\n"
        "# Here\n"
        "[gone](missing.md) [bad](other.md#nowhere) `[code](not-a-link.md)`\n"
        "```\n[fenced](also-not.md)\n```\n"
        "[web](https://example.org/x) [bad web](https:/example.org)\n"
        "[ref]: other.md#same-2\n"
        "`a span [over](two.md)\nlines [is](code.md)` [gone too](gone.md)\n",
        encoding="utf-8")
    assert broken_links(page) == [
        "page.md:3: missing.md (no such file)",
        "page.md:3: other.md#nowhere (no heading with anchor #nowhere)",
        "page.md:8: other.md#same-2 (no heading with anchor #same-2)",
        "page.md:10: gone.md (no such file)",
    ]
    assert malformed_external_links(page) == ["page.md:7: https:/example.org"]
