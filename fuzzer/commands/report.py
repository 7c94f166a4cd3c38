"""`convsmith report DIR`: the campaign's root causes as folders and as one HTML page, live or finished."""

from __future__ import annotations

import argparse
from pathlib import Path

from fuzzer.campaign.db import open_campaign
from fuzzer.commands.flags import DEFAULT_CORPUS
from fuzzer.triage.folders import write_root_causes
from fuzzer.triage.page import write_page
from fuzzer.triage.text import format_triage
from fuzzer.triage.view import triage

NAME = "report"
HELP = "write a campaign's root-cause folders and its report page (report.html): root causes, pictures, plots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="the campaign folder (--out of `convsmith fuzz`)")
    parser.add_argument("--page", type=Path, help="where to write the page (default: DIR/report.html)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="root causes of these cases are known")


def run(args: argparse.Namespace) -> int:
    db = open_campaign(args.dir)
    try:
        result = triage(args.dir, db, args.corpus)
    finally:
        db.close()
    folders = write_root_causes(args.dir, result)
    page = write_page(result, args.dir, args.page or args.dir / "report.html")
    print(format_triage(result, shown=10))
    print(f"root causes: {folders}\npage: {page}")
    return 0
