"""`convsmith status DIR`: a campaign at a glance, running or not: root causes first, then throughput."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuzzer.campaign.db import open_campaign
from fuzzer.campaign.progress import format_summary, summarize
from fuzzer.campaign.rewrites import format_coverage
from fuzzer.commands.flags import DEFAULT_CORPUS
from fuzzer.triage.limits import format_limits, limits
from fuzzer.triage.text import format_triage
from fuzzer.triage.view import triage

NAME = "status"
HELP = "summarize a campaign folder: root causes (new and known), throughput, time shares"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="the campaign folder (--out of `convsmith fuzz`)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="root causes of these cases are known")
    parser.add_argument("--json", action="store_true", help="print everything as JSON for scripts")


def run(args: argparse.Namespace) -> int:
    db = open_campaign(args.dir)
    try:
        summary = summarize(db)
        result = triage(args.dir, db, args.corpus)
        refusals = limits(db)
    finally:
        db.close()
    if args.json:
        print(json.dumps({**summary, "triage": result.to_json(), "limits": [lim.to_json() for lim in refusals]},
                         indent=1))
    else:
        print(format_triage(result))
        print("\n".join(format_limits(refusals)))
        print(format_summary(summary))
        print("\n".join(format_coverage(list(result.rewrites), result.exporter_split)))
    return 0
