"""Tests per minute for 1 and 2 workers under the local engine and the Ray engine, on this machine, one campaign
after the other, and the Ray engine's overhead: the CPU time it spends per test against the local engine's (the CPU
of this process and every process below it, Ray's own included, over the measured window).

Why CPU and not only tests per minute: on a shared box the other jobs' load changes from one campaign to the next
(the same 1-worker campaign measured 166 and 540 tests a minute over 15-20 s windows minutes apart), and the CPU time
a test costs does not depend on it.

    python bench/scale.py [--graphs 150] [--warm 20] [--workers 1,2] [--converters torch-onnx-script,ort-optimizer]

Each campaign tests `--warm` + `--graphs` graphs (seeds 0, 1, ...: the same tests under both engines) from a fresh
folder with the same flags (no reduction) through the campaign's own code (fuzz.py's flags, the Campaign class);
only the tests that end after the first `--warm` graphs are done count, so both engines are measured warm (fork
servers up, libraries imported, Ray's actors placed). Ray runs on one local Ray instance started before its
campaigns, with a CPU per core. Needs Ray (make install RAY=1).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ray  # noqa: E402

from fuzzer.campaign.loop import Campaign  # noqa: E402
from fuzzer.commands import fuzz  # noqa: E402


@dataclass(frozen=True)
class Figure:
    engine: str
    workers: int
    tests: int  # ended in the measured window
    seconds: float
    cpu_s: float  # of this process and all below it, over the window
    driver_cpu_s: float  # of this process alone (the campaign: the database, the cases, Ray's driver side)

    @property
    def per_minute(self) -> float:
        return 60.0 * self.tests / self.seconds if self.seconds > 0 else 0.0

    @property
    def driver_ms_per_test(self) -> float:
        return 1000.0 * self.driver_cpu_s / self.tests if self.tests else 0.0

    @property
    def per_cpu_minute(self) -> float:
        return 60.0 * self.tests / self.cpu_s if self.cpu_s > 0 else 0.0


def tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process and every live process below it, with their children that have
    ended and been waited for (a worker replaced after a crash is counted in its fork server's)."""
    parent, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parent[int(entry.name)] = int(fields[1])
            cpu[int(entry.name)] = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    mine, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier and pid not in mine]
        mine.update(frontier)
    return sum(cpu.get(pid, 0.0) for pid in mine)


def own_cpu_s() -> float:
    """CPU seconds of this process (all its threads)."""
    times = os.times()
    return times.user + times.system


def units_done(db_path: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM units WHERE done = 1").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:  # not made yet, or busy
        return 0


def sample_when_done(db_path: Path, counts: list[int], into: list[tuple[float, float, float]]
                     ) -> threading.Thread:
    """Sample (time, tree CPU, own CPU) in a thread as soon as each of `counts` graphs are done (the last before the
    campaign shuts its workers down: it has more to record first)."""
    def run() -> None:
        for count in counts:
            while units_done(db_path) < count:
                time.sleep(0.05)
            into.append((time.time(), tree_cpu_s(), own_cpu_s()))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def campaign(engine: str, workers: int, graphs: int, warm: int, converters: str) -> Figure:
    """One campaign of `warm` + `graphs` graphs in a fresh folder; the tests that ended after the warm-up."""
    out = Path(tempfile.mkdtemp(prefix=f"convsmith-scale-{engine}-{workers}-")) / "campaign"
    parser = argparse.ArgumentParser()
    fuzz.add_arguments(parser)
    args = parser.parse_args(["--workers", str(workers), "--out", str(out), "--converters", converters,
                              "--seed", "0", "--no-reduce", "--tests", str(warm + graphs)])
    out, db, spec = fuzz.new_campaign(args)
    samples: list[tuple[float, float, float]] = []
    sampler = sample_when_done(out / "campaign.db", [warm, warm + graphs], samples)
    Campaign(out, spec, db, workers, None, yield_cpu=engine == "local", engine=engine).run()
    sampler.join(timeout=10)
    (start, cpu_start, own_start), (end, cpu_end, own_end) = samples
    tests = db.conn.execute("SELECT COUNT(*) FROM tests WHERE finished > ? AND finished <= ?",
                            (start, end)).fetchone()[0]
    db.close()
    return Figure(engine, workers, int(tests), end - start, cpu_end - cpu_start, own_end - own_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=150, help="graphs measured (each tested by every converter)")
    parser.add_argument("--warm", type=int, default=20, help="graphs tested before the measure starts")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--converters", default="torch-onnx-script,ort-optimizer")
    parser.add_argument("--engines", default="local,ray", help="in this order")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    figures: list[Figure] = []
    for engine in args.engines.split(","):
        if engine == "ray":
            ray.init(num_cpus=os.cpu_count() or 1, log_to_driver=False, logging_level="WARNING",
                     configure_logging=False)
        try:
            for workers in counts:
                figures.append(campaign(engine, workers, args.graphs, args.warm, args.converters))
                print(f"{engine:5}  {workers} worker(s): {figures[-1].per_minute:7.1f} tests/min, "
                      f"{figures[-1].per_cpu_minute:7.1f} tests/CPU-min, campaign process "
                      f"{figures[-1].driver_ms_per_test:.2f} ms CPU/test", flush=True)
        finally:
            if engine == "ray":
                ray.shutdown()
    print(f"\n{os.cpu_count()} cores, converters {args.converters}, graphs {args.warm}..{args.warm + args.graphs - 1} "
          f"measured after {args.warm} warm-up graphs")
    print(f"{'workers':>7}  {'local/min':>9}  {'ray/min':>9}  {'local/CPU-min':>13}  {'ray/CPU-min':>11}  "
          f"{'ray CPU per test':>16}")
    by = {(f.engine, f.workers): f for f in figures}
    for workers in counts:
        local, remote = by.get(("local", workers)), by.get(("ray", workers))
        if local is None or remote is None:
            continue
        extra = f"{100 * (local.per_cpu_minute / remote.per_cpu_minute - 1):+.0f}%" if remote.per_cpu_minute else "n/a"
        print(f"{workers:>7}  {local.per_minute:9.1f}  {remote.per_minute:9.1f}  {local.per_cpu_minute:13.1f}  "
              f"{remote.per_cpu_minute:11.1f}  {extra:>16}")


if __name__ == "__main__":
    main()
