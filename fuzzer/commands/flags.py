"""Command-line flags shared by several commands: durations, name lists, generator options, library output."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

from fuzzer.converters import ConverterRegistry, load_registry
from fuzzer.support.errors import UsageError
from generators.dtypes import ALL, DType
from generators.generator import GenOptions
from generators.registry import REGISTRY

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "corpus"  # the checkout's regression corpus
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|m|h)\s*$")
_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """A positive duration with its unit ('90s', '10m', '2h', '1.5h') in seconds: the one form every command
    takes for time budgets and timeouts."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: a positive number and a unit, e.g. 90s, "
                                         "10m, 2h")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be positive")
    return seconds


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def names(text: str | None) -> tuple[str, ...]:
    """'a, b,c' -> ('a', 'b', 'c'); None or '' -> ()."""
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def name_list(known: Callable[[], object], what: str) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: comma-separated names, each one of `known()` (a container), else a usage error."""

    def parse(text: str) -> tuple[str, ...]:
        wanted = names(text)
        container = known()
        unknown = [n for n in wanted if n not in container]  # type: ignore[operator]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what}: {', '.join(unknown)} (known: "
                                             f"{', '.join(container)})")  # type: ignore[call-overload]
        if not wanted:
            raise argparse.ArgumentTypeError(f"no {what} given")
        return wanted

    return parse


def add_generator_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=positive_int, default=10, help="operators per graph")
    parser.add_argument("--ops", help="comma-separated operators to use (default: all)")
    parser.add_argument("--exclude-ops", help="comma-separated operators to leave out")
    parser.add_argument("--dtypes", help=f"comma-separated dtypes (default: {','.join(d.value for d in ALL)})")
    parser.add_argument("--max-numel", type=positive_int, default=GenOptions.max_numel,
                        help="element bound of every tensor")


def generator_options(args: argparse.Namespace) -> GenOptions:
    """GenOptions from parsed flags; unknown operators or dtypes are a UsageError."""
    include, exclude = names(args.ops), names(args.exclude_ops)
    unknown = [n for n in include + exclude if n not in REGISTRY]
    if unknown:
        raise UsageError(f"unknown operator(s): {', '.join(unknown)} (see `convsmith ops`)")
    try:
        dtypes = tuple(DType(d) for d in names(args.dtypes)) or ALL
    except ValueError as exc:
        raise UsageError(f"{exc}; known dtypes: {', '.join(d.value for d in ALL)}") from None
    return GenOptions(nodes=args.nodes, include_ops=include, exclude_ops=exclude, dtypes=dtypes,
                      max_numel=args.max_numel)


def registry_named(ref: str) -> ConverterRegistry:
    """The converter registry `ref` (MODULE:ATTR) names; a reference that does not load is a usage error."""
    try:
        return load_registry(ref)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise UsageError(f"--registry {ref}: {exc}") from None
