"""Campaign throughput: tests per minute (per converter) and the share of wall time outside converters and
runtimes (generation + oracle + our own overhead; goal <= 15%).

    python bench/fuzz.py [--seconds 60 | --minutes M] [--workers N] [--converters a,b] [--nodes K]
                         [--exact-nodes] [--avoid-unsupported] [--no-reduce] [--out DIR]

`measure()` is the same measurement as a function (bench/compare_nnsmith.py uses it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzzer.campaign.db import open_campaign  # noqa: E402
from fuzzer.campaign.progress import summarize  # noqa: E402
from fuzzer.commands.main import main as cli_main  # noqa: E402
from fuzzer.support.confine import rss_bytes  # noqa: E402


def measure(minutes: float, workers: int, converters: str | None = None, nodes: int | None = None,
            out: Path | None = None, exact_nodes: bool = False, avoid_unsupported: bool = False,
            reduce: bool = True, settings: str = "vary", prepare_ahead: bool | None = None
            ) -> tuple[int, dict[str, Any], Path]:
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
    args = parser.parse_args()
    minutes = args.minutes if args.minutes is not None else args.seconds / 60
    sampler = MemorySampler(interval_s=5.0)
    sampler.start()
    code, data, _ = measure(minutes, args.workers, args.converters, args.nodes, args.out, args.exact_nodes,
                            args.avoid_unsupported, not args.no_reduce)
    sampler.stopped.set()
    shares = data["shares"]
    print(f"\nbench: {data['tests_per_min']:.1f} tests/min with {args.workers} workers, "
          f"{data['ran_per_min']:.1f} of them ran their converter (the rest stopped upstream)")
    for conv, rate in sorted(data["per_converter_per_min"].items()):
        print(f"  {conv:<24} {rate:8.1f} tests/min, {data['ran_per_converter_per_min'][conv]:8.1f} ran")
    print(f"bench: share outside converters and runtimes {outside_share(data):.1%} (goal <= 15%): generation "
          f"{shares['generation']:.1%}, oracle {shares['oracle']:.1%}, overhead {shares['overhead']:.1%}")
    if data["ahead_share"]:
        print(f"bench: feeder processes generated beside the workers: {data['ahead_share']:.1%} of worker wall time")
    if sampler.samples:
        print(f"bench: largest process RSS over time (MB; goal: flat, under 1500 per worker): "
              f"{memory_trace(sampler.samples)}; peak {max(mb for _, mb in sampler.samples):.0f}")
    return code


if __name__ == "__main__":
    sys.exit(main())
