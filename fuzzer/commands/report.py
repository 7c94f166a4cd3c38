"""`convsmith report DIR`: the campaign's root causes as folders and as one HTML page, live or finished."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from fuzzer.campaign.db import open_campaign
from fuzzer.commands.flags import DEFAULT_CORPUS
from fuzzer.converters import CONVERTERS
from fuzzer.triage.folders import write_root_causes
from fuzzer.triage.impact import zoo_impacts
from fuzzer.triage.page import write_page
from fuzzer.triage.text import format_triage
from fuzzer.triage.view import triage
from fuzzer.triage.zoo_models import DEFAULT_CACHE

NAME = "report"
HELP = "write a campaign's root-cause folders and its report page (report.html): root causes, pictures, plots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="the campaign folder (--out of `convsmith fuzz`)")
    parser.add_argument("--page", type=Path, help="where to write the page (default: DIR/report.html)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="root causes of these cases are known")
    parser.add_argument("--impact", action=argparse.BooleanOptionalAction, default=True,
                        help="list, for each root cause, the zoo architectures whose converted models contain its "
                             "pattern (the models are made once per library versions and cached; default: on)")
    parser.add_argument("--zoo-cache", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                        help="where the zoo's converted models are cached")


def _exporting(entry: str) -> None:
    print(f"convsmith report: converting the zoo's {entry} (once for these library versions)", file=sys.stderr,
          flush=True)


def run(args: argparse.Namespace) -> int:
    db = open_campaign(args.dir)
    try:
        result = triage(args.dir, db, args.corpus)
    finally:
        db.close()
    if args.impact:
        result = dataclasses.replace(result, impacts=zoo_impacts(result.groups, args.dir, args.zoo_cache, CONVERTERS,
                                                                 _exporting))
    folders = write_root_causes(args.dir, result)
    page = write_page(result, args.dir, args.page or args.dir / "report.html")
    print(format_triage(result, shown=10))
    print(f"root causes: {folders}\npage: {page}")
    return 0
