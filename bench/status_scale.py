"""`status` and `report` on a week-sized database: a real campaign's database copied over and over (ids, seeds and
times shifted per copy) up to N tests, then each command timed as a user runs it.

    python bench/status_scale.py CAMPAIGN_DIR [--tests 10000000] [--out build/status-scale]

CAMPAIGN_DIR is any finished campaign folder (`convsmith fuzz --out DIR`); its case folders are linked, not copied,
so root causes and reports read real cases. The copy is made once per (source, size) and reused.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONVSMITH = ROOT / ".venv" / "bin" / "convsmith"
sys.path.insert(0, str(ROOT))

from fuzzer.campaign.db import CampaignDB  # noqa: E402


def copies_needed(conn: sqlite3.Connection, tests: int) -> int:
    have = conn.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
    if not have:
        raise SystemExit("the source campaign has no tests")
    return max(1, -(-tests // have))


def replicate(source: Path, out: Path, tests: int) -> None:
    """out/campaign.db: source's database with its units, tests and rewrites repeated up to `tests` tests."""
    out.mkdir(parents=True, exist_ok=True)
    for case in source.iterdir():
        if case.is_dir() and not case.name.startswith(".") and not (out / case.name).exists():
            (out / case.name).symlink_to(case.resolve())
    target = out / "campaign.db"
    partial = out / "campaign.db.partial"
    partial.unlink(missing_ok=True)
    src = sqlite3.connect(f"file:{source / 'campaign.db'}?mode=ro", uri=True)
    src.execute("VACUUM INTO ?", (str(partial),))
    with sqlite3.connect(partial) as copy:  # filled again from all the copies' rows when first opened
        copy.execute("DROP TABLE IF EXISTS tallies")
        copy.execute("DELETE FROM meta WHERE key = 'tallies'")
    copies = copies_needed(src, tests)
    span_idx = src.execute("SELECT MAX(idx) + 1 FROM units").fetchone()[0]
    t0, t1 = src.execute("SELECT MIN(started), MAX(COALESCE(ended, last_beat, started)) FROM sessions").fetchone()
    src.close()
    conn = sqlite3.connect(partial)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("ATTACH DATABASE ? AS src", (f"file:{source / 'campaign.db'}?mode=ro",))
    span_s = (t1 or t0) - t0 + 1.0
    for k in range(1, copies):
        di, dt = k * span_idx, k * span_s
        conn.execute("INSERT INTO units SELECT idx + ?, seed + ?, done, nodes, timings, sequences, value_strategy "
                     "FROM src.units", (di, di))
        conn.execute("INSERT INTO tests SELECT idx + ?, seed + ?, converter, options, symptom, stage, signature, "
                     "is_bug, labels, message, timings, wall_s, session, finished + ? FROM src.tests", (di, di, dt))
        conn.execute("INSERT INTO rewrites SELECT idx + ?, converter, rewrite FROM src.rewrites", (di,))
        conn.commit()
        print(f"\rcopy {k + 1}/{copies}", end="", flush=True)
    conn.execute("UPDATE sessions SET ended = started + ? WHERE id = (SELECT MAX(id) FROM sessions)",
                 (copies * span_s,))
    conn.commit()
    conn.close()
    partial.rename(target)
    print()


def timed(*args: str) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([str(CONVSMITH), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    return time.perf_counter() - start, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a finished campaign folder")
    parser.add_argument("--tests", type=int, default=10_000_000)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "status-scale")
    args = parser.parse_args()
    if not (args.source / "campaign.db").is_file():
        print(f"{args.source}: not a campaign folder (no campaign.db)", file=sys.stderr)
        return 2
    out = args.out / f"{args.source.resolve().name}-{args.tests}"
    if not (out / "campaign.db").exists():
        start = time.perf_counter()
        replicate(args.source, out, args.tests)
        print(f"built {out} in {time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    db = CampaignDB(out / "campaign.db")  # a copy of an older database gets its running totals once, here
    rows = db.conn.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
    db.close()
    print(f"opened (running totals filled where missing) in {time.perf_counter() - start:.1f} s")
    size_mb = (out / "campaign.db").stat().st_size / 2**20
    print(f"database: {rows:,} tests, {size_mb:,.0f} MB")
    for command in (("status", str(out)), ("status", str(out), "--json"), ("report", str(out))):
        seconds, code = timed(*command)
        print(f"convsmith {' '.join(command[:1] + command[2:])}: {seconds:.1f} s (exit {code})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
