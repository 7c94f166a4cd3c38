"""The `convsmith` command line: one module per subcommand under fuzzer/commands, listed in COMMANDS.

A subcommand module exports `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`. An error a user can
cause (UsageError, or a missing optional dependency) prints one line and exits non-zero; anything else is our
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from fuzzer.support.errors import UsageError

COMMANDS: tuple[str, ...] = (
    "generate",
    "ops",
    "check",
    "converters",
    "probe",
    "fuzz",
    "status",
    "reduce",
    "repro",
    "promote",
)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, object]]:
    parser = argparse.ArgumentParser(prog="convsmith", description="Fuzz deep-learning model converters.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules: dict[str, object] = {}
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"fuzzer.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"fuzzer.commands.{name}":
                # A missing optional dependency disables one command, not the CLI.
                modules[name] = exc
                sub.add_parser(name, help=f"(unavailable: missing module {exc.name})")
            continue
        module_parser = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(module_parser)
        modules[module.NAME] = module
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run one subcommand; returns the process exit status."""
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    module = modules[args.command]
    if isinstance(module, ModuleNotFoundError):
        print(f"convsmith {args.command}: needs the missing module {module.name!r}", file=sys.stderr)
        return 2
    try:
        return int(module.run(args) or 0)
    except UsageError as exc:
        print(f"convsmith {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"convsmith {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
