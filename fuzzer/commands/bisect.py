"""`convsmith bisect CASE [CASE ...]`: since which release of the blamed library a case's bug shows.

Each release runs the case's own repro.py in a cached environment (.convsmith-cache/envs/<dist>-<version>/, built
once, reused across cases); the result is printed and kept in case.json and report.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuzzer.cases.case_json import case_folder
from fuzzer.cases.folder import read_case
from fuzzer.diagnosis.bisect_case import (
    DEFAULT_TIMEOUT_S,
    ReproRunner,
    TimedRun,
    blamed_distribution,
    installed_release,
    record_bisection,
)
from fuzzer.diagnosis.bisect_search import NotShown, bisect_releases
from fuzzer.support.errors import CannotRun, Exit, UsageError
from fuzzer.support.release_envs import DEFAULT_ENVS
from fuzzer.support.releases import DEFAULT_SERIES, ReleasePlan, releases_to_try

NAME = "bisect"
HELP = "find the first release of the blamed library that shows a case's bug (real installs, cached)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases", nargs="+", type=Path, metavar="CASE", help="case folders (or their case.json)")
    parser.add_argument("--library", default="", metavar="DIST",
                        help="the pip distribution to bisect, instead of the one the case's blame names")
    parser.add_argument("--releases", type=int, default=DEFAULT_SERIES, metavar="N",
                        help="how far back: the N newest minor series before the installed release (or N releases "
                             "where the library has fewer series)")
    parser.add_argument("--envs", type=Path, default=DEFAULT_ENVS, help="where release environments are cached")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help="seconds one repro.py run may take")


def bisect_one(folder: Path, args: argparse.Namespace, plans: dict[str, ReleasePlan]) -> int:
    """Bisect one case folder, print each release and the summary, record it; the exit status."""
    case = read_case(folder)
    distribution = blamed_distribution(case, args.library)
    installed = installed_release(distribution)
    if distribution not in plans:
        plans[distribution] = releases_to_try(distribution, installed, args.releases)
    plan = plans[distribution]
    print(f"{case.id}: {distribution}, {len(plan.releases)} releases from {plan.releases[0]} to "
          f"{plan.releases[-1]} (installed {plan.installed})", flush=True)
    runner = ReproRunner(folder.resolve(), distribution, plan.installed, args.envs, args.timeout)
    bisection = bisect_releases(distribution, plan.releases, plan.installed, TimedRun(runner))
    record_bisection(folder, bisection)
    print(f"{case.id}: {bisection.summary()}", flush=True)
    return Exit.OK


def run(args: argparse.Namespace) -> int:
    """Bisect every case given; one line per case that cannot be bisected, and the worst exit status."""
    if args.releases < 1:
        raise UsageError(f"--releases must be at least 1, not {args.releases}")
    status, plans = Exit.OK, {}
    for path in args.cases:
        try:
            code = bisect_one(case_folder(path), args, plans)
        except UsageError as exc:
            print(f"convsmith bisect: {exc}", file=sys.stderr)
            code = Exit.USAGE
        except (CannotRun, NotShown) as exc:
            print(f"convsmith bisect: {path}: {exc}", file=sys.stderr)
            code = Exit.CANNOT_RUN
        status = max(status, code)
    return status
