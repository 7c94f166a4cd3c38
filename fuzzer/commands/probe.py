"""`convsmith probe`: which (operator, dtype) pairs each converter converts and runs, cached per version."""

from __future__ import annotations

import argparse
from pathlib import Path

from fuzzer.campaign.probe import ProbeError, run_probe
from fuzzer.check.pipeline import ConverterUnavailable
from fuzzer.converters import CONVERTERS
from fuzzer.support.errors import UsageError
from generators.dtypes import DType
from generators.registry import REGISTRY

NAME = "probe"
HELP = "probe and cache which (operator, dtype) pairs each converter supports; list the results"
DEFAULT_CACHE = Path(".convsmith-cache/probe")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--converters", default="torch-onnx-script", help="comma-separated converter names")
    parser.add_argument("--ops", help="comma-separated operators (default: all)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: all)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"cache folder (default {DEFAULT_CACHE})")
    parser.add_argument("--minutes", type=float, help="stop after this long; rerun to resume")
    parser.add_argument("--list", action="store_true", help="print every unsupported pair")


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def run(args: argparse.Namespace) -> int:
    converters = _split(args.converters) or []
    unknown = [c for c in converters if c not in CONVERTERS]
    ops = _split(args.ops)
    unknown += [o for o in ops or [] if o not in REGISTRY]
    if unknown:
        raise UsageError(f"unknown converter(s) or operator(s): {', '.join(unknown)}")
    try:
        dtypes = [DType(d) for d in _split(args.dtypes) or []] or None
        limit = args.minutes * 60 if args.minutes else None
        table = run_probe(args.cache, converters, ops=ops, dtypes=dtypes, time_limit_s=limit, progress=True)
    except (ValueError, ConverterUnavailable, ProbeError) as exc:
        raise UsageError(str(exc)) from None
    for name in converters:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(table.counts(name).items()))
        print(f"{name}: {counts}")
        if args.list:
            for op, dtype in sorted(table.unsupported(name)):
                print(f"  unsupported {op} {dtype}")
        excluded = table.excluded_ops(name)
        if excluded:
            print(f"  ops unsupported for every dtype: {', '.join(excluded)}")
    return 0
