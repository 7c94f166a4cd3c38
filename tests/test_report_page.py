"""The report page of a small real campaign, opened in a real headless browser: one table row per root cause, graph
pictures, three plots, a working sort, a screenshot; without Graphviz, DOT text; an empty campaign's page; the
operator sequences; the study comparison's shares."""

from __future__ import annotations

import html
import shutil
import subprocess
from collections import Counter
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from fuzzer.campaign.db import DB_NAME, CampaignDB, open_campaign
from fuzzer.commands.main import main
from fuzzer.triage.page import write_page
from fuzzer.triage.pictures import NO_GRAPHVIZ
from fuzzer.triage.plots import _binned, _draw_rates, _figure_svg, study_shares
from fuzzer.triage.view import Triage, triage
from oracles.sequences import Enrichment

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"
# The bugs come from a converter planted through the registry (it crashes naming each graph's first operator: a
# root cause per operator), not from whatever the installed exporters get wrong on some seeds.
FUZZ = ["--tests", "16", "--seed", "3", "--workers", "1", "--registry", "test_isolation:QUICK_REGISTRY",
        "--converters", "faulty-crash", "--nodes", "4", "--no-reduce"]
CHROMIUM = shutil.which("chromium")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--enable-logging=stderr", "--v=0")
BROWSER_TIMEOUT_S = 90
HITS_COLUMN = 8  # the root-cause table's "hits" header (0-based)
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                  "wbr"})
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install chromium "
                                                              "(the .ci/run script installs it)")
# Graph pictures are SVG only where Graphviz's `dot` draws them (the page shows DOT text without it).
needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="no Graphviz `dot`: apt-get install graphviz "
                                                                       "(the .ci/run script installs it)")


class Dom(HTMLParser):
    """What the tests read of a page: the table rows' keys in order, links, and <svg>s by enclosing class."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.open: list[set[str]] = []  # the classes of each open element
        self.keys: list[str] = []
        self.hrefs: list[str] = []
        self.svgs: Counter[str] = Counter()
        self.pres: Counter[str] = Counter()
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and attributes.get("data-key"):
            self.keys.append(str(attributes["data-key"]))
        if tag == "a" and attributes.get("href"):
            self.hrefs.append(str(attributes["href"]))
        if tag in ("svg", "pre"):
            counter = self.svgs if tag == "svg" else self.pres
            counter.update({c for c in ("graph", "plot") if any(c in classes for classes in self.open)})
        if tag not in VOID:
            self.open.append(set(str(attributes.get("class") or "").split()))

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self.open:
            self.open.pop()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Triage]:
    out = tmp_path_factory.mktemp("report") / "campaign"
    assert main(["fuzz", *FUZZ, "--out", str(out)]) == 0
    db = open_campaign(out)
    try:
        result = triage(out, db, CORPUS)
    finally:
        db.close()
    assert len(result.groups) >= 2
    return out, result


def _browser(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(CHROMIUM), *BROWSER_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, check=True)
    assert "Uncaught" not in done.stderr, done.stderr  # the page's own script ran without an error
    return done


@pytest.mark.slow
@needs_chromium
@needs_graphviz
def test_the_page_in_a_browser(campaign: tuple[Path, Triage], tmp_path: Path) -> None:
    out, result = campaign
    page = write_page(result, out, out / "report.html")
    dumped = _browser(page, tmp_path / "profile", "--dump-dom").stdout
    dom = Dom(dumped)
    assert sorted(dom.keys) == sorted(g.key for g in result.groups)  # one row per root cause
    assert dom.svgs["graph"] >= 1 and dom.svgs["plot"] == 3
    assert result.headline.line() in html.unescape(dumped)
    reports = [h for h in dom.hrefs if h.endswith("report.md")]
    assert reports and all((page.parent / unquote(h)).is_file() for h in reports)  # relative links resolve
    shot = page.with_suffix(".png")
    _browser(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2400")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@needs_chromium
def test_clicking_a_header_sorts_the_table(campaign: tuple[Path, Triage], tmp_path: Path) -> None:
    out, result = campaign
    page = write_page(result, out, tmp_path / "report.html")
    click = f"<script>document.querySelectorAll('#causes thead th')[{HITS_COLUMN}].click();</script></body>"
    page.write_text(page.read_text().replace("</body>", click))
    keys = Dom(_browser(page, tmp_path / "profile", "--dump-dom").stdout).keys
    hits = {g.key: g.hits for g in result.groups}
    assert len(keys) == len(hits) and [hits[k] for k in keys] == sorted(hits.values())


# Not marked slow: `make test`'s real campaign (the fuzz CLI, a worker, a converter planted through the registry),
# triaged and written as a page.
def test_without_graphviz_the_graphs_are_dot_text(campaign: tuple[Path, Triage], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out, result = campaign
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` to be found
    text = write_page(result, out, tmp_path / "report.html").read_text()
    dom = Dom(text)
    assert NO_GRAPHVIZ in text and dom.svgs["graph"] == 0 and dom.pres["graph"] == len(result.groups)
    assert dom.svgs["plot"] == 3


@pytest.mark.slow
def test_an_empty_campaign_gets_a_page(tmp_path: Path) -> None:
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    try:
        result = triage(tmp_path, db)
    finally:
        db.close()
    page = write_page(result, tmp_path, tmp_path / "report.html")
    text = page.read_text()
    assert result.headline.line() in text and result.headline.root_causes == 0
    dom = Dom(text)
    assert dom.keys == [] and dom.svgs["plot"] == 3
    sequence = Enrichment("cumsum > roll", 5, 1, 6, 40, 12.5, 0.0004)
    text = write_page(replace(result, sequences=(sequence,)), tmp_path, page).read_text()
    assert "cumsum &gt; roll" in text and "5 / 6" in text and "0.0004" in text


def test_the_study_comparison_counts_shares_of_bug_tests() -> None:
    shares, node, total = study_shares({"crash": {"node_conversion": 3}, "hang": {"runtime_execution": 1},
                                         "invalid_model": {"validation": 2}, "wrong_values": {"node_conversion": 2},
                                         "wrong_dtype": {"node_conversion": 2}})
    assert total == 10 and node == 0.7
    assert shares == {"crash": 0.6, "wrong model": 0.4, "other": 0.0}
    assert study_shares({}) == ({"crash": 0.0, "wrong model": 0.0, "other": 0.0}, 0.0, 0)


def test_a_weeks_throughput_is_drawn_as_binned_means() -> None:
    minutes, counts = [float(m) for m in range(5)], [2.0, 4.0, 6.0, 8.0, 1.0]
    assert _binned(minutes, counts, 1) == (minutes, counts)
    assert _binned(minutes, counts, 2) == ([0.0, 2.0, 4.0], [3.0, 7.0, 1.0])
    week = {"torch-onnx-dynamo": tuple((float(m), 10.0) for m in range(7 * 24 * 60))}
    svg = _figure_svg(lambda figure: _draw_rates(figure, week), "t-")
    assert "each point: the mean of 42 minutes" in svg
    assert svg.count("<use ") < 100  # the axis ticks; a marker per minute would be 10,080
