"""`convsmith converters`: every registered converter, whether it runs here (and why not), library versions."""

from __future__ import annotations

import argparse

from fuzzer.converters import list_converters

NAME = "converters"
HELP = "list converters with their availability and library versions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    infos = list_converters()
    width = max(len(i.name) for i in infos)
    for info in infos:
        versions = ", ".join(f"{k} {v}" for k, v in info.versions.items())
        state = "available" if info.available else f"unavailable: {info.reason}"
        print(f"{info.name:<{width}}  {state}" + (f"  [{versions}]" if info.available and versions else ""))
    return 0
