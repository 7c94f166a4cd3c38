"""`convsmith reduce CASE`: minimize a saved case's graph, keeping its signature; writes <id>-reduced beside it."""

from __future__ import annotations

import argparse
from pathlib import Path

from fuzzer.cases.folder import CASE_JSON, load_case, write_case
from fuzzer.commands.flags import duration
from fuzzer.reduce.case import ReductionFailed, reduce_case
from fuzzer.support.errors import UsageError

NAME = "reduce"
HELP = "minimize a saved bug case (same signature, smaller graph) and write the reduced case folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case", type=Path, metavar="CASE", help="case folder (or its case.json)")
    parser.add_argument("--time", type=duration, default=60.0, metavar="DURATION",
                        help="time to spend, e.g. 90s or 5m (seconds)")
    parser.add_argument("--out", type=Path, help="folder for the reduced case (default: beside CASE)")


def run(args: argparse.Namespace) -> int:
    case = load_case(args.case)
    folder = args.case.parent if args.case.name == CASE_JSON else args.case
    try:
        reduced, result = reduce_case(case, args.time, original=folder.name)
    except ReductionFailed as exc:
        raise UsageError(str(exc)) from None
    path = write_case(args.out or folder.parent, reduced, replace=True)
    helped = ", ".join(result.helped) or "none"
    print(f"{case.id}: {int(result.size_before[0])} -> {int(result.size_after[0])} nodes in {result.seconds:.1f}s "
          f"({result.checks} checks{', budget spent' if result.exhausted else ''}; passes that helped: {helped}) "
          f"-> {path}")
    return 0
