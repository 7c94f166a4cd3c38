"""Campaign throughput: tests per minute (per converter) and the share of wall time outside converters and
runtimes (generation + oracle + our own overhead; goal <= 15%).

    python bench/fuzz.py [--seconds 60 | --minutes M] [--workers N] [--converters a,b] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzzer.cli import main as cli_main  # noqa: E402
from fuzzer.db import open_campaign  # noqa: E402
from fuzzer.progress import summarize  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--converters")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    minutes = args.minutes if args.minutes is not None else args.seconds / 60
    out = args.out or Path(tempfile.mkdtemp(prefix="convsmith-bench-")) / "campaign"
    argv = ["fuzz", "--minutes", str(minutes), "--workers", str(args.workers), "--out", str(out)]
    if args.converters:
        argv += ["--converters", args.converters]
    code = cli_main(argv)
    db = open_campaign(out)
    data = summarize(db)
    shares = data["shares"]
    outside = shares["generation"] + shares["oracle"] + shares["overhead"]
    print(f"\nbench: {data['tests_per_min']:.1f} tests/min with {args.workers} workers")
    for conv, rate in sorted(data["per_converter_per_min"].items()):
        print(f"  {conv:<24} {rate:8.1f} tests/min")
    print(f"bench: share outside converters and runtimes {outside:.1%} (goal <= 15%): generation "
          f"{shares['generation']:.1%}, oracle {shares['oracle']:.1%}, overhead {shares['overhead']:.1%}")
    return code


if __name__ == "__main__":
    sys.exit(main())
