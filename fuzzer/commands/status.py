"""`convsmith status DIR`: the summary of a campaign, running or not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuzzer.campaign.db import open_campaign
from fuzzer.campaign.progress import format_summary, summarize

NAME = "status"
HELP = "summarize a campaign folder: tests by converter x symptom x stage, unique bugs, throughput, time shares"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="the campaign folder (--out of `convsmith fuzz`)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON for scripts")


def run(args: argparse.Namespace) -> int:
    db = open_campaign(args.dir)
    try:
        summary = summarize(db)
    finally:
        db.close()
    print(json.dumps(summary, indent=1) if args.json else format_summary(summary))
    return 0
