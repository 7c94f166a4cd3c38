"""`convsmith promote CASE`: copy a (reduced) case into corpus/ with its expectation: a known bug, or must pass."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from fuzzer.cases.folder import load_case, write_case
from fuzzer.cases.replay import Outcome, replay
from fuzzer.commands.flags import DEFAULT_CORPUS, registry_named
from fuzzer.converters import DEFAULT_REGISTRY
from fuzzer.support.errors import UsageError

NAME = "promote"
HELP = "copy a case into the regression corpus with its expectation (known bug, or must pass)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case", type=Path, metavar="CASE", help="case folder (or its case.json)")
    parser.add_argument("--expect", choices=("bug", "pass"),
                        help="known bug (xfail until fixed) or must pass (default: bug if it reproduces now)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="corpus folder (default: corpus/)")
    parser.add_argument("--no-verify", action="store_true", help="do not replay the case before promoting it")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY, metavar="MODULE:ATTR",
                        help="where the case's converter is found (default: convsmith's own)")


def run(args: argparse.Namespace) -> int:
    case = load_case(args.case)
    expect = args.expect
    if not args.no_verify:
        result = replay(case, registry=registry_named(args.registry))
        if expect is None:
            expect = "bug" if result.outcome is Outcome.REPRODUCES else "pass"
        if expect == "bug" and result.outcome is not Outcome.REPRODUCES:
            raise UsageError(f"{result.line()}: not promoted as a known bug")
        if expect == "pass" and result.verdict.is_bug:
            raise UsageError(f"{case.id} still fails ({result.verdict.signature}): not promoted as must-pass")
    expect = expect or "bug"
    path = write_case(args.corpus, dataclasses.replace(case, expectation=expect), replace=True)
    print(f"{case.id}: promoted as {'a known bug' if expect == 'bug' else 'must pass'} -> {path}")
    return 0
