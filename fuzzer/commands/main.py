"""The `convsmith` command line: one module per subcommand under fuzzer/commands, listed in COMMANDS.

A subcommand module exports `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`. Every command keeps
one exit-status rule (fuzzer.support.errors.Exit): 0 nothing wrong, 1 a bug shows, 2 bad usage or input (one
line, nothing created), 3 could not run here (a missing dependency or device). Anything else raised is our bug
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from fuzzer.support.errors import CannotRun, Exit, UsageError
from fuzzer.support.quiet import quiet_environment

COMMANDS: tuple[str, ...] = (
    "generate",
    "ops",
    "zoo",
    "check",
    "converters",
    "probe",
    "fuzz",
    "status",
    "report",
    "reduce",
    "repro",
    "promote",
    "bisect",
)

EXIT_CODES = """exit status:
  0  nothing wrong
  1  a bug shows (check finds one, repro reproduces one)
  2  bad usage or input (one line on stderr; nothing is created)
  3  could not run here (a missing dependency, converter library or device; no space left)
  4  a replayed case fails, but not with the bug it was filed for (repro)
  130 interrupted (Ctrl-C)
"""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit 2 (`--help` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each flag's default after its help (where it has one worth showing); the exit-status epilog as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
        if shown and "%(default)" not in text:
            value = ",".join(action.default) if isinstance(action.default, tuple) else action.default
            text += f" (default: {value})"
        return text


def version() -> str:
    try:
        return importlib.metadata.version("convsmith")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, object]]:
    parser = OneLineParser(prog="convsmith", description="Fuzz deep-learning model converters.",
                           epilog=EXIT_CODES, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"convsmith {version()}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show what the libraries under test print (exporter dumps, warnings, runtime logs)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    modules: dict[str, object] = {}
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"fuzzer.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"fuzzer.commands.{name}":
                # A missing optional dependency disables one command, not the CLI.
                modules[name] = exc
                sub.add_parser(name, help=f"(unavailable: missing module {exc.name})", epilog=EXIT_CODES,
                               formatter_class=HelpFormatter)
            continue
        module_parser = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP, epilog=EXIT_CODES,
                                       formatter_class=HelpFormatter)
        module.add_arguments(module_parser)
        modules[module.NAME] = module
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run one subcommand; returns the process exit status."""
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    if not args.verbose:
        quiet_environment()  # before any TensorFlow import, here or in a child: children inherit it
    module = modules[args.command]
    if isinstance(module, ModuleNotFoundError):
        print(f"convsmith {args.command}: needs the missing module {module.name!r}", file=sys.stderr)
        return Exit.CANNOT_RUN
    try:
        status = int(module.run(args) or 0)
        sys.stdout.flush()  # inside the try: a reader that went away shows here, not at exit
        return status
    except UsageError as exc:
        print(f"convsmith {args.command}: {exc}", file=sys.stderr)
        return Exit.USAGE
    except CannotRun as exc:
        print(f"convsmith {args.command}: {exc}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except KeyboardInterrupt:
        print(f"convsmith {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`convsmith ops | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
