"""`convsmith probe`: which (operator, dtype) pairs each converter converts and runs, cached per version."""

from __future__ import annotations

import argparse
from pathlib import Path

from fuzzer.campaign.probe import DEFAULT_CACHE, ProbeError, run_probe
from fuzzer.check.pipeline import run_check
from fuzzer.commands.flags import duration, name_list, names
from fuzzer.converters import CONVERTERS
from fuzzer.support.errors import UsageError
from fuzzer.support.quiet import quietly
from generators.dtypes import DType
from generators.registry import REGISTRY

NAME = "probe"
HELP = "probe and cache which (operator, dtype) pairs each converter supports; list the results"
LOG = "probe.log"  # in the cache folder: what the libraries printed while probing


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--converters", type=name_list(lambda: CONVERTERS, "converter(s)"),
                        default=("torch-onnx-script",), help="comma-separated converters")
    parser.add_argument("--ops", type=name_list(lambda: REGISTRY, "operator(s)"), help="comma-separated operators "
                        "(default: all)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: all)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="cache folder")
    parser.add_argument("--time", type=duration, metavar="DURATION", help="stop after this long (e.g. 90s, 10m); "
                        "run again to resume")
    parser.add_argument("--list", action="store_true", help="print every unsupported pair")


def run(args: argparse.Namespace) -> int:
    try:
        dtypes = [DType(d) for d in names(args.dtypes)] or None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    args.cache.mkdir(parents=True, exist_ok=True)
    with open(args.cache / LOG, "a") as log:
        check = run_check if args.verbose else quietly(run_check, log.write)
        try:
            table = run_probe(args.cache, args.converters, ops=args.ops, dtypes=dtypes, time_limit_s=args.time,
                              progress=True, check=check)
        except ProbeError as exc:
            raise UsageError(str(exc)) from None
    for name in args.converters:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(table.counts(name).items()))
        print(f"{name}: {counts}")
        if args.list:
            for op, dtype in sorted(table.unsupported(name)):
                print(f"  unsupported {op} {dtype}")
        excluded = table.excluded_ops(name)
        if excluded:
            print(f"  ops unsupported for every dtype: {', '.join(excluded)}")
    return 0
