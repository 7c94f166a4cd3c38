"""`convsmith ops`: every operator in the catalogue with its family, arity and dtypes."""

from __future__ import annotations

import argparse

from generators.registry import REGISTRY

NAME = "ops"
HELP = "list every operator with its family and the dtypes it accepts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", help="only this family")


def run(args: argparse.Namespace) -> int:
    rows = [op for op in REGISTRY.values() if args.family in (None, op.family)]
    width = max((len(op.name) for op in rows), default=4)
    for op in rows:
        dtypes = sorted({d.value for s in op.sigs for d in s.ins} | {s.out.value for s in op.sigs})
        print(f"{op.name:<{width}}  {op.family:<10}  inputs={op.arity}  {','.join(dtypes)}")
    print(f"{len(rows)} operators")
    return 0
