"""`convsmith converters`: every registered converter, whether it runs here (and why not), library versions."""

from __future__ import annotations

import argparse
import dataclasses
import json

from fuzzer.converters import list_converters

NAME = "converters"
HELP = "list converters with their availability and library versions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list for scripts")


def run(args: argparse.Namespace) -> int:
    infos = list_converters()
    if args.json:
        print(json.dumps([dataclasses.asdict(i) for i in infos], indent=1))
        return 0
    width = max(len(i.name) for i in infos)
    for info in infos:
        versions = ", ".join(f"{k} {v}" for k, v in info.versions.items())
        state = "available" if info.available else f"unavailable: {info.reason}"
        print(f"{info.name:<{width}}  {state}" + (f"  [{versions}]" if info.available and versions else ""))
    return 0
