"""Campaign throughput: tests per minute (per converter) and the share of wall time outside converters and
runtimes (generation + oracle + our own overhead; goal <= 15%) over the loop, from the first test's start to the last
test's end (start-up and wind-down are printed apart); and what a campaign finds over time.

    python bench/fuzz.py [--seconds 60 | --minutes M] [--workers N] [--converters a,b] [--nodes K]
                         [--exact-nodes] [--avoid-unsupported] [--no-reduce] [--out DIR] [--strategies on|off]
    python bench/fuzz.py --compare-strategies --minutes 30 [--out DIR]

Every run also prints the new root causes found in each 10 minutes and the share of tests that ended unsupported
or in a root cause the campaign had already found. `--strategies off` runs without what the reach work added
(`--values uniform --settings default --no-demote-known`: uniform inputs, every converter at its defaults, known
culprits generated as often as anything); `--compare-strategies` runs a campaign with them (avoidance per
converter included: it needs `convsmith probe --converters torch-onnx-script,torch-onnx-dynamo` once) and one without
at the same time, one worker each (without feeders, so the two take one core each), and prints both side by side.

`measure()` is the same measurement as a function (bench/compare_nnsmith.py uses it).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzzer.campaign.db import open_campaign  # noqa: E402
from fuzzer.campaign.progress import summarize  # noqa: E402
from fuzzer.cases.case_head import root_cause_of  # noqa: E402
from fuzzer.cases.case_json import CaseError  # noqa: E402
from fuzzer.commands.main import main as cli_main  # noqa: E402
from fuzzer.support.confine import rss_bytes  # noqa: E402


def measure(minutes: float, workers: int, converters: str | None = None, nodes: int | None = None,
            out: Path | None = None, exact_nodes: bool = False, avoid_unsupported: bool = False,
            reduce: bool = True, settings: str = "vary", prepare_ahead: bool | None = None,
            extra: list[str] | None = None) -> tuple[int, dict[str, Any], Path]:
    """Runs a campaign of `minutes` into `out` (a temporary folder by default) and returns its exit status,
    `fuzzer.progress.summarize` of it and the folder. `exact_nodes`: every graph has `nodes` operators (the
    campaign otherwise draws 2..nodes); `avoid_unsupported`: skip the (op, dtype) pairs the cached probe of the
    converters found unsupported; `reduce` False: no background minimization of new cases; `settings`: "vary" (each
    test draws its converter's options) or "default"; `prepare_ahead`: feeder processes on or off (None: the campaign's
    default)."""
    out = out or Path(tempfile.mkdtemp(prefix="convsmith-bench-")) / "campaign"
    argv = ["fuzz", "--time", f"{minutes * 60:g}s", "--workers", str(workers), "--out", str(out),
            "--settings", settings]
    if converters:
        argv += ["--converters", converters]
    if nodes is not None:
        argv += ["--nodes", str(nodes)] + (["--min-nodes", str(nodes)] if exact_nodes else [])
    if avoid_unsupported:
        argv += ["--avoid-unsupported", converters or "torch-onnx-script"]
    if not reduce:
        argv += ["--no-reduce"]
    if prepare_ahead is not None:
        argv += ["--prepare-ahead" if prepare_ahead else "--no-prepare-ahead"]
    argv += extra or []
    code = cli_main(argv)
    return code, summarize(open_campaign(out)), out


def descendants_rss_mb() -> dict[int, float]:
    """Resident memory (MB) of every process below this one (the workers sit under the forkserver)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - mine
        mine |= frontier
    sizes = {pid: rss_bytes(pid) for pid in mine}
    return {pid: size / 2**20 for pid, size in sizes.items() if size}  # 0: it exited meanwhile


class MemorySampler(threading.Thread):
    """Every `interval_s`, the largest resident size among the campaign's processes (is memory flat?)."""

    def __init__(self, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.interval_s, self.samples, self.stopped = interval_s, [], threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.stopped.wait(self.interval_s):
            rss = descendants_rss_mb()
            if rss:
                self.samples.append((time.monotonic() - start, max(rss.values())))


def memory_trace(samples: list[tuple[float, float]], bins: int = 12) -> str:
    """The largest sample in each of `bins` equal spans of the run, as 'minute MB' pairs."""
    end = samples[-1][0] or 1.0
    peaks: dict[int, tuple[float, float]] = {}
    for t, mb in samples:
        b = min(int(t / end * bins), bins - 1)
        if b not in peaks or mb > peaks[b][1]:
            peaks[b] = (t, mb)
    return ", ".join(f"{t / 60:.1f}m {mb:.0f}" for t, mb in (peaks[b] for b in sorted(peaks)))


STRATEGIES_OFF = ["--values", "uniform", "--settings", "default", "--no-demote-known"]
WINDOW_S = 600.0


def novelty_figures(folder: Path) -> dict[str, Any]:
    """New root causes per 10-minute window, and the tests that ended unsupported or in a root cause found before."""
    conn = open_campaign(folder).conn
    start = conn.execute("SELECT MIN(started) FROM sessions").fetchone()[0] or 0.0
    cause_of: dict[str, str] = {}
    for signature, case_dir in conn.execute("SELECT signature, case_dir FROM bugs"):
        try:
            cause_of[signature] = root_cause_of(folder / case_dir).key if case_dir else signature
        except (CaseError, OSError):
            cause_of[signature] = signature
    windows: collections.Counter[int] = collections.Counter()
    seen: set[str] = set()
    tests = unsupported = repeats = 0
    for finished, symptom, signature, is_bug in conn.execute(
            "SELECT finished, symptom, signature, is_bug FROM tests ORDER BY finished"):
        tests += 1
        unsupported += symptom == "unsupported"
        if not is_bug:
            continue
        cause = cause_of.get(signature, signature)
        if cause in seen:
            repeats += 1
        else:
            seen.add(cause)
            windows[int((finished - start) // WINDOW_S)] += 1
    return {"root_causes": len(seen), "per_window": [windows[k] for k in range(max(windows, default=-1) + 1)],
            "tests": tests, "unsupported_share": unsupported / max(tests, 1),
            "repeat_share": repeats / max(tests, 1)}


def format_novelty(label: str, figures: dict[str, Any]) -> str:
    windows = ", ".join(f"{n} in minutes {10 * k}-{10 * (k + 1)}" for k, n in enumerate(figures["per_window"]))
    wasted = figures["unsupported_share"] + figures["repeat_share"]
    return (f"{label}: {figures['root_causes']} root causes over {figures['tests']} tests; new root causes per 10 "
            f"minutes: {windows or 'none'}; tests that ended unsupported or in a root cause found before: "
            f"{wasted:.1%} ({figures['unsupported_share']:.1%} unsupported, {figures['repeat_share']:.1%} repeats)")


# Avoidance per converter is one of the strategies: each exporter's probed unsupported pairs skip only its own tests
# (and send the ONNX tools to the other exporter). It needs both probes cached (`convsmith probe --converters ...`).
STRATEGIES_ON = ["--avoid-unsupported", "torch-onnx-script,torch-onnx-dynamo"]


def compare_strategies(minutes: float, out: Path) -> int:
    """Two campaigns at once, one worker each: with the reach strategies and without; prints both."""
    runs = {"with strategies": STRATEGIES_ON,
            "without (uniform values, default settings, no demotion, no avoidance)": STRATEGIES_OFF}
    procs, logs = {}, {}
    out.mkdir(parents=True, exist_ok=True)
    for k, (label, extra) in enumerate(runs.items()):
        argv = [sys.executable, "-m", "fuzzer", "fuzz", "--time", f"{minutes * 60:g}s", "--workers", "1",
                "--no-prepare-ahead", "--no-reduce", "--out", str(out / f"run-{k}"), *extra]
        logs[label] = out / f"run-{k}.log"
        with logs[label].open("w") as log:
            procs[label] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    codes = {label: proc.wait() for label, proc in procs.items()}
    for k, label in enumerate(runs):
        if codes[label] != 0:
            last = (logs[label].read_text().strip().splitlines() or ["(no output)"])[-1]
            print(f"{label}: the campaign failed (exit status {codes[label]}): {last}")
            continue
        print(format_novelty(label, novelty_figures(out / f"run-{k}")) + f" (exit status {codes[label]})")
    return max(codes.values())


def outside_share(data: dict[str, Any]) -> float:
    shares = data["shares"]
    return shares["generation"] + shares["oracle"] + shares["overhead"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--converters")
    parser.add_argument("--nodes", type=int, help="operators per graph (the campaign's default when left out)")
    parser.add_argument("--exact-nodes", action="store_true", help="every graph has --nodes operators")
    parser.add_argument("--avoid-unsupported", action="store_true",
                        help="avoid what the cached probe of --converters found unsupported")
    parser.add_argument("--no-reduce", action="store_true", help="no background minimization of new cases")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--strategies", choices=("on", "off"), default="on",
                        help="off: uniform values, default settings, no demotion of known culprits")
    parser.add_argument("--compare-strategies", action="store_true",
                        help="a campaign with the strategies and one without, at once, one worker each")
    args = parser.parse_args()
    minutes = args.minutes if args.minutes is not None else args.seconds / 60
    if args.compare_strategies:
        return compare_strategies(minutes, args.out or Path(tempfile.mkdtemp(prefix="convsmith-strategies-")))
    sampler = MemorySampler(interval_s=5.0)
    sampler.start()
    code, data, folder = measure(minutes, args.workers, args.converters, args.nodes, args.out, args.exact_nodes,
                                 args.avoid_unsupported, not args.no_reduce,
                                 settings="default" if args.strategies == "off" else "vary",
                                 extra=STRATEGIES_OFF[:2] + STRATEGIES_OFF[4:] if args.strategies == "off" else None)
    sampler.stopped.set()
    shares = data["shares"]
    print(f"\nbench: {data['tests_per_min']:.1f} tests/min with {args.workers} workers, "
          f"{data['ran_per_min']:.1f} of them ran their converter (the rest stopped upstream)")
    for conv, rate in sorted(data["per_converter_per_min"].items()):
        print(f"  {conv:<24} {rate:8.1f} tests/min, {data['ran_per_converter_per_min'][conv]:8.1f} ran")
    print(f"bench: share outside converters and runtimes, from the first test to the last {outside_share(data):.1%} "
          f"(goal <= 15%): generation {shares['generation']:.1%}, oracle {shares['oracle']:.1%}, overhead "
          f"{shares['overhead']:.1%}; start-up and wind-down apart: {data['edges_s']:.1f} worker seconds of "
          f"{data['worker_wall_s']:.0f}")
    if data["ahead_share"]:
        print(f"bench: feeder processes generated beside the workers: {data['ahead_share']:.1%} of worker wall time")
    print("bench: " + format_novelty(f"strategies {args.strategies}", novelty_figures(folder)))
    if sampler.samples:
        print(f"bench: largest process RSS over time (MB; goal: flat, under 1500 per worker): "
              f"{memory_trace(sampler.samples)}; peak {max(mb for _, mb in sampler.samples):.0f}")
    return code


if __name__ == "__main__":
    sys.exit(main())
