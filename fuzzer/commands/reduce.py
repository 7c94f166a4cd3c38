"""`convsmith reduce CASE...`: minimize saved cases (same signature, smaller graph); writes <id>-reduced beside
each. Candidates are checked in a confined child process, so cases that kill or hang their process reduce too.

With `--stdin` it reads case folders one per line as they come and answers each with a JSON line: the campaign
keeps one such process for its whole run instead of starting Python and torch again for every case.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import onnx

from fuzzer.cases.case import CaseData
from fuzzer.cases.case_json import CASE_JSON
from fuzzer.cases.folder import load_case
from fuzzer.commands.flags import duration, positive_int
from fuzzer.converters import DEFAULT_REGISTRY, load_registry
from fuzzer.modelcheck.zoo_finding import is_zoo_finding, reduce_zoo_finding
from fuzzer.reduce.case import NotReproducedAlone, ReductionFailed, reduce_case
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker
from fuzzer.support.errors import UsageError

NAME = "reduce"
HELP = "minimize saved bug cases (same signature, smaller graph) and write each reduced case folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases", type=Path, nargs="*", metavar="CASE", help="case folders (or their case.json)")
    parser.add_argument("--stdin", action="store_true",
                        help="also read case folders from standard input, one per line, and print a JSON line each")
    parser.add_argument("--time", type=duration, default=60.0, metavar="DURATION",
                        help="time to spend on each case, e.g. 90s or 5m (seconds)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="folder for the reduced cases (default: beside each CASE)")
    where.add_argument("--inside", action="store_true",
                       help="write each reduced case inside its CASE folder (as a campaign keeps them)")
    parser.add_argument("--shape-first", action="store_true",
                        help="reduce a case by the passes that take nodes away only, undiagnosed, and polish and "
                             "diagnose it (dims, ranks, attributes, values, options; whose bug) when its reduced "
                             "case is given again")
    parser.add_argument("--timeout", type=duration, default=60.0, metavar="DURATION",
                        help="a candidate check that takes longer is a hang")
    parser.add_argument("--memory-mb", type=positive_int, default=4096,
                        help="memory of the checking process before out-of-memory")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY, metavar="MODULE:ATTR",
                        help="the ConverterRegistry holding the cases' converters")
    parser.add_argument("--log-dir", type=Path, metavar="DIR",
                        help="folder for the checking processes' crash logs (default: a temporary one, removed at "
                             "the end)")


def run(args: argparse.Namespace) -> int:
    if not args.cases and not args.stdin:
        raise UsageError("reduce: give at least one CASE folder, or --stdin")
    if args.log_dir is not None:
        try:
            args.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"reduce: --log-dir {args.log_dir}: {exc.strerror or exc}") from None
    # A bad CASE is a usage error before anything starts; the cases read here are not read again.
    given = {folder: load_case(folder) for folder in _folders(args.cases, ()) if not is_zoo_finding(folder)}
    config = CheckerConfig(args.registry, args.timeout, args.memory_mb, device=checker_device(),
                           log_dir=str(args.log_dir or ""))
    failed = 0
    with IsolatedChecker(config) as checker:
        for folder in _folders(args.cases, sys.stdin if args.stdin else ()):
            outcome = (reduce_zoo(folder, args.registry, args.time) if is_zoo_finding(folder) else
                       reduce_one(folder, args.out, args.inside, checker, args.time, given.pop(folder, None),
                                  args.shape_first))
            failed += not outcome["ok"]
            if args.stdin:
                print(json.dumps(outcome), flush=True)
            elif outcome["ok"]:
                print(outcome["line"], flush=True)
            else:
                print(f"convsmith reduce: {outcome['error']}", file=sys.stderr, flush=True)
    return 1 if failed else 0


def checker_device() -> str:
    """'cuda' on a machine with a usable GPU (a case found there runs there; no address-space limit), else 'cpu'."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _folders(given: list[Path], feed: Iterable[str]) -> Iterator[Path]:
    for path in given:
        yield path.parent if path.name == CASE_JSON else path
    for line in feed:
        if line.strip():
            yield Path(line.strip())


def reduce_zoo(folder: Path, registry: str, budget_s: float | None = None) -> dict[str, Any]:
    """Reduce a campaign's finding in a zoo model (its evidence folder) to a cut case inside it, as reduce_one
    answers: {"case", "ok", "seconds"} and the line and path, or the error."""
    start = time.monotonic()
    base: dict[str, Any] = {"case": str(folder)}
    try:
        path = reduce_zoo_finding(folder, load_registry(registry), budget_s)
    except Exception as exc:  # noqa: BLE001 - one case's failure is its answer; the campaign's reducer goes on
        error = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        return base | {"ok": False, "error": error, "seconds": round(time.monotonic() - start, 2),
                       "unreproduced": False}
    nodes = len(onnx.load(str(path / "upstream.onnx")).graph.node)
    line = f"{folder.name}: a zoo model's finding -> a cut of {nodes} ONNX nodes in {time.monotonic() - start:.1f}s"
    return base | {"ok": True, "line": f"{line} -> {path}", "path": str(path), "polished": True,
                   "seconds": round(time.monotonic() - start, 2)}


def reduce_one(folder: Path, out: Path | None, inside: bool, checker: IsolatedChecker, budget_s: float,
               case: CaseData | None = None, shape_first: bool = False) -> dict[str, Any]:
    """Reduce one case folder (its `case`, when already read) into `out`, inside it, or beside it; a reduced case
    is reduced again in its own place. {"case", "ok", "seconds"}, "polished" and the summary line, or the error
    and whether the case's own graph did not show its bug ("unreproduced")."""
    start = time.monotonic()
    base: dict[str, Any] = {"case": str(folder)}
    try:
        case = case or load_case(folder)
        again = case.reduction is not None
        where = folder.parent if again or not inside else folder
        reduction = reduce_case(case, out or where, checker, budget_s, original=case.original or folder.name,
                                shape_only=shape_first and not again)
    except (UsageError, ReductionFailed, RuntimeError) as exc:
        return base | {"ok": False, "error": str(exc), "seconds": round(time.monotonic() - start, 2),
                       "unreproduced": isinstance(exc, NotReproducedAlone)}
    result = reduction.result
    helped = ", ".join(result.helped) or "none"
    polished = not shape_first or again
    line = (f"{case.id}: {int(result.size_before[0])} -> {int(result.size_after[0])} nodes in {result.seconds:.1f}s "
            f"({result.checks} checks{', budget spent' if result.exhausted else ''}; passes that helped: {helped}"
            f"{'' if polished else '; to polish'}) -> {reduction.path}")
    return base | {"ok": True, "line": line, "path": str(reduction.path), "polished": polished,
                   "seconds": round(time.monotonic() - start, 2)}
