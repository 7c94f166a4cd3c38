"""`convsmith ops`: every operator in the catalogue with its family, arity and dtypes."""

from __future__ import annotations

import argparse
import json

from fuzzer.support.errors import UsageError
from generators.registry import REGISTRY

NAME = "ops"
HELP = "list every operator with its family and the dtypes it accepts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", help=f"only this family (one of {', '.join(REGISTRY.families)})")
    parser.add_argument("--json", action="store_true", help="print a JSON list for scripts")
    parser.add_argument("--coverage", action="store_true",
                        help="instead, list the ATen operators each exporter translates that no operator exercises")


def run(args: argparse.Namespace) -> int:
    if args.family is not None and args.family not in REGISTRY.families:
        raise UsageError(f"unknown family {args.family!r}; known: {', '.join(REGISTRY.families)}")
    if args.coverage:
        return print_coverage(args.json)
    rows = [op for op in REGISTRY.values() if args.family in (None, op.family)]
    table = [{"name": op.name, "family": op.family, "inputs": op.arity,
              "dtypes": sorted({d.value for s in op.sigs for d in s.ins} | {s.out.value for s in op.sigs})}
             for op in rows]
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    width = max((len(op.name) for op in rows), default=4)
    for row in table:
        print(f"{row['name']:<{width}}  {row['family']:<10}  inputs={row['inputs']}  {','.join(row['dtypes'])}")
    print(f"{len(rows)} operators")
    return 0


def print_coverage(as_json: bool) -> int:
    """Per exporter: how many of its ATen operators the catalogue exercises, and the public ones it does not."""
    from fuzzer.converters import CONVERTERS
    from fuzzer.converters.coverage import coverage, exercised_aten_ops

    exporters = [c for c in CONVERTERS.values() if c.supported_aten_ops is not None and c.availability()[0]]
    rows = coverage(exporters, exercised_aten_ops(REGISTRY))
    if as_json:
        print(json.dumps([{"converter": r.converter, "supported": len(r.supported), "exercised": len(r.exercised),
                           "not_exercised": list(r.missing)} for r in rows], indent=1))
        return 0
    for row in rows:
        print(f"{row.converter}: {len(row.exercised)} of {len(row.supported)} translated ATen operators exercised; "
              f"{len(row.missing)} public ones are not:")
        print("  " + " ".join(name.removeprefix("aten::") for name in row.missing))
    return 0
