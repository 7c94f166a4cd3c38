"""Days without loss: a campaign run for a given time while its processes' resident memory, the database's size and
`convsmith status`'s latency are sampled, then printed with their trend (flat, or linear in the tests done).

    python bench/soak.py --time 2h [--workers 2] [--out DIR] [--interval 30] [--status-every 300] [-- FUZZ ARGS]

Samples go to DIR/.logs/soak.jsonl as they are taken (a soak stopped early keeps what it measured). Processes are
told apart by their command line: the campaign, its workers, feeders and reducers, and whatever else it started.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONVSMITH = ROOT / ".venv" / "bin" / "convsmith"
sys.path.insert(0, str(ROOT))

from fuzzer.commands.flags import duration  # noqa: E402


def process_tree(root: int) -> dict[int, int]:
    """Every live descendant of `root` and its parent (read from /proc)."""
    parents: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(fields[1])].append(int(entry.name))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for kid in parents.get(parent, []):
            found[kid] = parent
            todo.append(kid)
    return found


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def role(pid: int, parent: int) -> str:
    """What a process of the campaign is, by its command line (a fork server's children share its line: they are
    the workers and their feeders)."""
    cmd = command_line(pid)
    if "forkserver" in cmd:
        return "worker or feeder" if "forkserver" in command_line(parent) else "fork server"
    for word, name in (("resource_tracker", "resource tracker"), ("reduce", "reducer"), ("bisect", "bisector")):
        if word in cmd:
            return name
    return "other"


def rss_mb(pid: int) -> float:
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def database(out: Path) -> tuple[float, int]:
    """The database's size in MB (its pages, the write-ahead log's included) and its tests so far; (0, -1) before
    it exists or while it is busy."""
    try:
        import sqlite3

        conn = sqlite3.connect(f"file:{out / 'campaign.db'}?mode=ro", uri=True, timeout=5)
        pages = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        row = conn.execute("SELECT COALESCE(SUM(n), 0) FROM tallies WHERE kind = 'cell'").fetchone()
        conn.close()
        return pages / 2**20, int(row[0])
    except Exception:
        return 0.0, -1


def status_seconds(out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(CONVSMITH), "status", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=600)
    return time.perf_counter() - start


def sample(campaign: subprocess.Popen, out: Path, started: float, with_status: bool) -> dict[str, Any]:
    by_role: dict[str, list[float]] = defaultdict(list)
    tree = process_tree(campaign.pid)
    for pid in [campaign.pid, *tree]:
        rss = rss_mb(pid)
        if rss > 0:  # gone since it was listed
            by_role["campaign" if pid == campaign.pid else role(pid, tree[pid])].append(rss)
    size, tests = database(out)
    row = {"t_s": round(time.monotonic() - started, 1), "tests": tests, "db_mb": round(size, 2),
           "rss_mb": {name: [round(v, 1) for v in values] for name, values in sorted(by_role.items())}}
    if with_status:
        row["status_s"] = round(status_seconds(out), 2)
    return row


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def report(rows: list[dict[str, Any]]) -> None:
    """Per role: first, last and largest resident memory (MB, the largest process of the role) and the trend of
    the second half; the database in MB per 1,000 tests; status's latency first and last."""
    if not rows:
        print("no samples")
        return
    half = rows[len(rows) // 2:]
    roles = sorted({name for row in rows for name in row["rss_mb"]})
    print(f"{len(rows)} samples over {rows[-1]['t_s'] / 60:.1f} min, {rows[-1]['tests']} tests")
    for name in roles:
        series = [(r["t_s"] / 3600, max(r["rss_mb"].get(name, [0.0]))) for r in rows if name in r["rss_mb"]]
        later = [(r["t_s"] / 3600, max(r["rss_mb"].get(name, [0.0]))) for r in half if name in r["rss_mb"]]
        print(f"  {name:<17} rss first {series[0][1]:7.1f} MB, last {series[-1][1]:7.1f}, max "
              f"{max(v for _, v in series):7.1f}; second half {slope(later):+7.1f} MB/hour")
    grown = [(r["tests"], r["db_mb"]) for r in rows if r["tests"] > 0]
    if len(grown) >= 2:
        print(f"  database: {grown[-1][1]:.1f} MB at {grown[-1][0]} tests, {1000 * slope(grown):.3f} MB per 1,000 "
              "tests (linear fit)")
    timed = [(r["t_s"], r["status_s"]) for r in rows if "status_s" in r]
    if timed:
        print(f"  status: {timed[0][1]:.1f} s at {timed[0][0] / 60:.0f} min, {timed[-1][1]:.1f} s at "
              f"{timed[-1][0] / 60:.0f} min, max {max(s for _, s in timed):.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", type=duration, required=True, help="the campaign's budget (e.g. 2h)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "soak")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between memory samples")
    parser.add_argument("--status-every", type=float, default=300.0, help="seconds between status timings")
    parser.add_argument("fuzz_args", nargs="*", help="more `convsmith fuzz` arguments (after --)")
    args = parser.parse_args()
    if (args.out / "campaign.db").exists():
        print(f"{args.out} already holds a campaign: choose another --out", file=sys.stderr)
        return 2
    log = args.out / ".logs" / "soak.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [str(CONVSMITH), "fuzz", "--time", f"{args.time:.0f}s", "--workers", str(args.workers),
               "--out", str(args.out), *(args.fuzz_args or ["--avoid-unsupported"])]
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    with open(args.out.parent / f"{args.out.name}.fuzz.log", "w") as output:
        campaign = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "CI": "1"})
        last_status = -args.status_every
        while campaign.poll() is None:
            time.sleep(args.interval)
            now = time.monotonic() - started
            with_status = now - last_status >= args.status_every and (args.out / "campaign.db").exists()
            last_status = now if with_status else last_status
            row = sample(campaign, args.out, started, with_status)
            rows.append(row)
            with open(log, "a") as out:
                out.write(json.dumps(row) + "\n")
    print(f"campaign exited {campaign.returncode} after {(time.monotonic() - started) / 60:.1f} min "
          f"(its output: {args.out.parent / f'{args.out.name}.fuzz.log'})")
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
