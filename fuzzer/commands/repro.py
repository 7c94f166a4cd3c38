"""`convsmith repro CASE...`: replay saved cases on the installed versions; exit 1 when a bug still shows."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fuzzer.cases.folder import load_case
from fuzzer.cases.replay import Outcome, Replay, replay
from fuzzer.support.errors import Exit, UsageError
from fuzzer.support.quiet import library_output

NAME = "repro"
HELP = ("replay saved bug cases on the installed versions: reproduces, fixed, or fails differently (exit 1 when "
        "any case still shows a bug, 0 when every one is fixed)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases", nargs="+", type=Path, metavar="CASE", help="case folders (or their case.json)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per case for scripts")


def run(args: argparse.Namespace) -> int:
    results: list[Replay] = []
    bad_input = False
    for path in args.cases:
        try:
            with library_output() as captured:
                result = replay(load_case(path))
        except UsageError as exc:
            print(f"{path}: bad input: {exc}", file=sys.stderr)
            bad_input = True
            continue
        finally:
            if args.verbose and captured.text:
                sys.stderr.write(captured.text)
        results.append(result)
        print(json.dumps(result.to_json()) if args.json else result.line(), flush=True)
    if bad_input:
        return Exit.USAGE
    return Exit.BUG if any(r.outcome is not Outcome.FIXED for r in results) else Exit.OK
