"""Live progress (a tqdm bar, or a log line per minute when stdout is not a terminal) and the campaign summary."""

from __future__ import annotations

import collections
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from fuzzer.campaign import tallies
from fuzzer.campaign.policy.novelty import DEMOTED_META, NOVELTY_META, Novelty
from fuzzer.campaign.result import LOST_SYMPTOMS

if TYPE_CHECKING:
    from fuzzer.campaign.db import CampaignDB

# Cutting a filed bug's culprit out of a graph makes the graph a test then runs ("culprit-avoided" before the test,
# "culprit_cut" after it): generation, while the steps inside them are booked by their own names.
GENERATION = frozenset({"generate", "materialize", "inputs", "source", "reference", "wait_for_graph",
                        "culprit-avoided", "culprit_cut"})
AHEAD = "ahead."  # timers of a feeder's own work (ahead.py), done beside the worker's, not in its time
BLAME_TIMER = "blame"  # deciding whose bug a newly filed case is (the worker's with_blame): judging, not converting
ORACLE = frozenset({"oracle", "rerun", "locate", "culprit", BLAME_TIMER})
SHARE_NAMES = ("generation", "conversion", "runtime", "oracle", "overhead")


def category(timer: str) -> str:
    """generation, runtime, oracle (incl. rerun/locate follow-ups) or conversion (every converter step).

    A step timed inside a follow-up ("rerun.export", "locate.reference") is booked by the step's own name."""
    timer = timer.rsplit(".", 1)[-1]
    if timer in GENERATION:
        return "generation"
    if timer in ORACLE:
        return "oracle"
    if "runtime" in timer or "baseline" in timer:
        return "runtime"
    return "conversion"


@dataclass
class Counts:
    """Live counts by symptom, unique bugs, and our own errors."""

    by_symptom: collections.Counter[str] = field(default_factory=collections.Counter)
    unique_bugs: int = 0
    own_errors: int = 0

    @classmethod
    def from_db(cls, db: CampaignDB) -> Counts:
        counts = cls()
        for _, symptom, _, n, _ in tallies.cells(db.conn):
            counts.by_symptom[symptom] += n
        counts.unique_bugs = db.conn.execute("SELECT COUNT(*) FROM bugs").fetchone()[0]
        counts.own_errors = db.conn.execute("SELECT COUNT(*) FROM errors").fetchone()[0]
        return counts

    def add(self, symptom: str, new_bug: bool) -> None:
        self.by_symptom[symptom] += 1
        self.unique_bugs += int(new_bug)

    @property
    def tests(self) -> int:
        return sum(self.by_symptom.values())

    def line(self) -> str:
        c = self.by_symptom
        died = sum(c[symptom] for symptom in LOST_SYMPTOMS)
        return (f"pass {c['pass']} crash {c['crash']} wrong {c['wrong_values'] + c['wrong_shape'] + c['wrong_dtype']} "
                f"invalid {c['invalid_model']} unsupported {c['unsupported']} died/hung/oom {died} "
                f"bugs {self.unique_bugs} own-errors {self.own_errors}")


class Progress:
    """A tqdm bar with tests/s on a terminal; otherwise one log line every `interval_s` seconds."""

    def __init__(self, stream: TextIO | None = None, interactive: bool | None = None, interval_s: float = 60.0,
                 total: int | None = None) -> None:
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.interval_s = interval_s
        self.start = time.monotonic()
        self.last_line = self.start
        self.shown = 0
        self.bar: Any = None
        if self.interactive:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="test", file=self.stream, dynamic_ncols=True)

    def update(self, counts: Counts) -> None:
        now = time.monotonic()
        if self.bar is not None:
            self.bar.update(counts.tests - self.shown)
            self.shown = counts.tests
            self.bar.set_postfix_str(counts.line(), refresh=False)
        elif now - self.last_line >= self.interval_s:
            self.last_line = now
            rate = counts.tests / max(now - self.start, 1e-9)
            print(f"[{time.strftime('%H:%M:%S')}] {counts.tests} tests ({rate:.2f}/s) {counts.line()}",
                  file=self.stream, flush=True)

    def close(self, counts: Counts) -> None:
        if self.bar is not None:
            self.update(counts)
            self.bar.close()


# ---- the summary --------------------------------------------------------------------------------------------

def summarize(db: CampaignDB) -> dict[str, Any]:
    """Everything `convsmith status` shows, as plain data (from the running totals: as quick on a week's database)."""
    conn = db.conn
    cells = tallies.cells(conn)
    table = [(converter, symptom, stage, n) for converter, symptom, stage, n, _ in cells]
    bugs = [dict(zip(("signature", "symptom", "stage", "converter", "count", "case_dir"), r, strict=True))
            for r in conn.execute(
        "SELECT signature, symptom, stage, converter, count, case_dir FROM bugs ORDER BY count DESC, signature")]
    per_converter: collections.Counter[str] = collections.Counter()
    ran: collections.Counter[str] = collections.Counter()
    for converter, _, stage, n, _ in cells:
        per_converter[converter] += n
        # A test stopped upstream (its source or the export it starts from failed) never exercised its converter.
        ran[converter] += n if stage != "source" else 0
    wall, worker_wall, loop_worker_wall = session_walls(conn)
    shares: collections.Counter[str] = collections.Counter()
    ahead = 0.0
    for name, (_, _, seconds) in tallies.read(conn, tallies.Kind.TIMER).items():
        if name.startswith(AHEAD):
            ahead += seconds
        else:
            shares[category(name)] += seconds
    # Shares are of the loop (each session from its first test's start to its last test's end): start-up (imports,
    # workers, probes) and wind-down are a fixed cost per session, shown apart as `edges_s`.
    measured = sum(shares.values())
    shares["overhead"] = max(loop_worker_wall - measured, 0.0)
    total_share = max(loop_worker_wall, measured, 1e-9)
    tests = sum(per_converter.values())
    return {
        "tests": tests,
        "units_done": db.done_units(),
        "wall_s": wall,
        "worker_wall_s": worker_wall,
        "edges_s": max(worker_wall - loop_worker_wall, 0.0),  # worker seconds before the first and after the last test
        "tests_per_min": tests / (wall / 60) if wall > 0 else 0.0,
        "tests_ran": sum(ran.values()),
        "ran_per_min": sum(ran.values()) / (wall / 60) if wall > 0 else 0.0,
        "ran_per_converter_per_min": {k: ran.get(k, 0) / (wall / 60) if wall > 0 else 0.0 for k in per_converter},
        "per_converter_per_min": {k: v / (wall / 60) if wall > 0 else 0.0 for k, v in per_converter.items()},
        "table": table,
        "bugs": bugs,
        "own_errors": conn.execute("SELECT COUNT(*) FROM errors").fetchone()[0],
        "shares": {k: shares[k] / total_share for k in SHARE_NAMES},
        "ahead_share": ahead / total_share,  # feeders' generation, in parallel, per worker wall second
        "sessions": conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
        "demoted": db.get_meta(DEMOTED_META) or [],
        "cut_out": _cut_out(db.get_meta(NOVELTY_META)),
        "values": {k: n for k, (n, _, _) in sorted(tallies.read(conn, tallies.Kind.VALUES).items())},
        "sources": {k: {"units": n, "worker_s": seconds}
                    for k, (n, _, seconds) in sorted(tallies.read(conn, tallies.Kind.SOURCE).items())},
    }


def _cut_out(tally: dict[str, Any] | None) -> dict[str, list[str]]:
    """Per converter, the operators its filed bugs are filed under or spread over, cut out before it runs."""
    out: dict[str, list[str]] = {}
    for converter, operator in Novelty.from_tally(tally).avoided():
        out.setdefault(converter, []).append(operator)
    return out


def session_walls(conn: Any) -> tuple[float, float, float]:
    """Wall seconds of every session, worker seconds of every session, and worker seconds of every session's loop
    (from its first test's start to its last test's end)."""
    wall = worker_wall = loop_worker_wall = 0.0
    for started, ended, beat, workers, first, last in conn.execute(
            "SELECT started, ended, last_beat, workers, first_test, last_test FROM sessions"):
        span = max((ended or beat or started) - started, 0.0)
        first, last = (first, last) if first is not None else (started, started)
        wall += span
        worker_wall += span * workers
        loop_worker_wall += max(min(last, started + span) - max(first, started), 0.0) * workers
    return wall, worker_wall, loop_worker_wall


def format_sources(sources: dict[str, dict[str, float]]) -> str:
    """The budget split between sources: done units of each, and its share of the done units' worker time."""
    total = sum(s["worker_s"] for s in sources.values()) or 1.0
    return "units by source: " + ", ".join(f"{k} {s['units']:.0f} ({s['worker_s'] / total:.0%} of their worker time)"
                                          for k, s in sources.items())


def format_summary(data: dict[str, Any]) -> str:
    """Throughput and where the time went; the per-signature table is in `status --json` and the report page."""
    lines = [f"{data['tests']} tests ({data['units_done']} graphs done) in {data['wall_s'] / 60:.1f} min over "
             f"{data['sessions']} session(s): {data['tests_per_min']:.1f} tests/min, of which "
             f"{data['ran_per_min']:.1f} ran their converter (the rest stopped upstream or were known unsupported)"]
    for conv, rate in sorted(data["per_converter_per_min"].items()):
        ran = data["ran_per_converter_per_min"].get(conv, 0.0)
        lines.append(f"  {conv:<24} {rate:8.1f} tests/min, {ran:8.1f} ran their converter")
    by_kind = collections.Counter((b["symptom"], b["stage"]) for b in data["bugs"])
    lines.append(f"{len(data['bugs'])} signatures: " + ", ".join(f"{n} {symptom} at {stage}" for (symptom, stage), n
                                                                 in sorted(by_kind.items(), key=lambda kv: -kv[1])))
    lines.append(f"own errors (convsmith bugs): {data['own_errors']}")
    lines.append("share of worker wall time from the first test to the last: "
                 + ", ".join(f"{k} {v:.0%}" for k, v in data["shares"].items())
                 + f" (start-up and wind-down apart: {data['edges_s']:.0f} worker seconds)")
    if len(data.get("sources", {})) > 1:
        lines.append(format_sources(data["sources"]))
    if data["values"]:
        lines.append("graphs by value strategy: " + ", ".join(f"{k} {v}" for k, v in sorted(data["values"].items())))
    if data["demoted"]:
        lines.append(f"generated less (behind bugs hit often): {len(data['demoted'])} (operator, dtype) pairs: "
                     + ", ".join(f"{op} {dtype}" for op, dtype in data["demoted"][:8])
                     + (" ..." if len(data["demoted"]) > 8 else ""))
    for converter, ops in sorted(data["cut_out"].items()):
        lines.append(f"cut out before {converter} runs (behind its bugs hit often): {len(ops)} operator"
                     + ("s" if len(ops) > 1 else "") + ": "
                     + ", ".join(ops[:8]) + (" ..." if len(ops) > 8 else ""))
    if data["ahead_share"]:
        lines.append(f"feeder processes prepared graphs ahead, beside the workers: {data['ahead_share']:.0%} of "
                     "worker wall time (the workers' own generation share is their wait for it)")
    return "\n".join(lines)
