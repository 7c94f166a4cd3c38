"""Command-line flags shared by the commands that generate graphs, and their GenOptions."""

from __future__ import annotations

import argparse

from fuzzer.support.errors import UsageError
from generators.dtypes import ALL, DType
from generators.generator import GenOptions
from generators.registry import REGISTRY


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def add_generator_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=10, help="operators per graph (default 10)")
    parser.add_argument("--ops", help="comma-separated operators to use (default: all)")
    parser.add_argument("--exclude-ops", help="comma-separated operators to leave out")
    parser.add_argument("--dtypes", help=f"comma-separated dtypes (default: {','.join(d.value for d in ALL)})")
    parser.add_argument("--max-numel", type=int, default=GenOptions.max_numel, help="element bound of every tensor")


def generator_options(args: argparse.Namespace, nodes: int | None = None) -> GenOptions:
    """GenOptions from parsed flags; unknown operators or dtypes are a UsageError."""
    include, exclude = _names(args.ops), _names(args.exclude_ops)
    unknown = [n for n in include + exclude if n not in REGISTRY]
    if unknown:
        raise UsageError(f"unknown operator(s): {', '.join(unknown)} (see `convsmith ops`)")
    try:
        dtypes = tuple(DType(d) for d in _names(args.dtypes)) or ALL
    except ValueError as exc:
        raise UsageError(f"{exc}; known dtypes: {', '.join(d.value for d in ALL)}") from None
    count = nodes if nodes is not None else args.nodes
    if count < 1 or args.max_numel < 1:
        raise UsageError("--nodes and --max-numel must be positive")
    return GenOptions(nodes=count, include_ops=include, exclude_ops=exclude, dtypes=dtypes, max_numel=args.max_numel)
