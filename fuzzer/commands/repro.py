"""`convsmith repro CASE...`: replay saved cases on the installed versions; exit 1 when a bug still shows."""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from fuzzer.cases.case import CaseData
from fuzzer.cases.folder import load_case
from fuzzer.cases.replay import REPLAY_CHECK, Outcome, Replay, replay, replay_outcome
from fuzzer.cases.repro import child_timeout_s
from fuzzer.commands.flags import registry_named
from fuzzer.converters import DEFAULT_REGISTRY
from fuzzer.diagnosis.crosscheck import LOST
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker, Job
from fuzzer.support.errors import Exit, UsageError
from fuzzer.support.quiet import library_output
from oracles.verdict import Symptom

LOST_TIMEOUT_S = 60.0  # a replay of a death that neither dies nor ends by then is another failure
NAME = "repro"
HELP = ("replay saved bug cases on the installed versions: exit 1 when any case still shows its bug, 4 when none "
        "does but one fails differently, 2 when a folder is not a case (the others are still replayed), 0 when "
        "every one is fixed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases", nargs="+", type=Path, metavar="CASE", help="case folders (or their case.json)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per case for scripts")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY, metavar="MODULE:ATTR",
                        help="where the cases' converters are found (a case whose worker died replays in a "
                             "confined child)")


def run(args: argparse.Namespace) -> int:
    results: list[Replay] = []
    not_cases: list[Path] = []
    for path in args.cases:
        try:
            with library_output() as captured:
                result = replayed(load_case(path), args.registry)
        except UsageError as exc:
            print(f"{path}: not a case: {exc}", file=sys.stderr)
            not_cases.append(path)
            continue
        finally:
            if args.verbose and captured.text:
                sys.stderr.write(captured.text)
        results.append(result)
        print(json.dumps(result.to_json()) if args.json else result.line(), flush=True)
    if len(args.cases) > 1 and not args.json:
        print(tally(results, len(not_cases)))
    return exit_status({r.outcome for r in results}, bool(not_cases))


def replayed(case: CaseData, registry: str) -> Replay:
    """The case replayed: in this process, or, for a case whose conversion killed, hung or exhausted its process,
    in a confined child (as the campaign ran it), whose death is the verdict."""
    if case.verdict.symptom not in LOST:
        return replay(case, registry=registry_named(registry))
    hang = case.verdict.symptom is Symptom.HANG
    config = CheckerConfig(registry, child_timeout_s(case.verdict) if hang else LOST_TIMEOUT_S, device=case.device)
    with IsolatedChecker(config) as checker:
        if case.converter not in checker.registry:
            raise UsageError(f"{case.id}: unknown converter {case.converter!r} (see --registry)")
        job = Job(case.graph, case.seed, case.converter, case.converter_options, case.device, case.values)
        return replay_outcome(case, checker.verdict(job, REPLAY_CHECK))


def exit_status(outcomes: set[Outcome], bad_input: bool) -> int:
    """The bug the cases were filed for outranks another failure, which outranks a folder that is not a case."""
    if Outcome.REPRODUCES in outcomes:
        return Exit.BUG
    if Outcome.DIFFERENT in outcomes:
        return Exit.DIFFERENT
    return Exit.USAGE if bad_input else Exit.OK


def tally(results: list[Replay], not_cases: int) -> str:
    """'17 folders: 15 reproduce, 1 fixed, 1 fails differently, 0 not a case'."""
    counts = collections.Counter(r.outcome for r in results)
    parts = [f"{counts[Outcome.REPRODUCES]} reproduce", f"{counts[Outcome.FIXED]} fixed",
             f"{counts[Outcome.DIFFERENT]} fail differently", f"{not_cases} not a case"]
    return f"{len(results) + not_cases} folders: " + ", ".join(parts)
