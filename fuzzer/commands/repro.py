"""`convsmith repro CASE...`: replay saved cases; exit 0 all reproduce, 1 some fixed or different, 2 bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuzzer.cases.folder import load_case
from fuzzer.cases.replay import Outcome, replay
from fuzzer.support.errors import UsageError

NAME = "repro"
HELP = "replay saved bug cases on the installed versions: reproduces, fixed, or fails differently"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases", nargs="+", type=Path, metavar="CASE", help="case folders (or their case.json)")


def run(args: argparse.Namespace) -> int:
    worst, bad_input = Outcome.REPRODUCES, False
    for path in args.cases:
        try:
            result = replay(load_case(path))
        except UsageError as exc:
            print(f"{path}: bad input: {exc}", file=sys.stderr)
            bad_input = True
            continue
        print(result.line(), flush=True)
        worst = max(worst, result.outcome)
    if bad_input:
        return 2
    return 0 if worst is Outcome.REPRODUCES else 1
