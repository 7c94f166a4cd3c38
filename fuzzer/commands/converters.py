"""`convsmith converters`: every registered converter, whether it runs here (and why not), library versions, and the
stack under test: each library's locked and installed version, a mismatch marked."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from fuzzer.converters import NOT_OFFERED, ConverterInfo, list_converters
from fuzzer.converters.stack import StackRow, libraries_under_test, mismatches, stack_rows
from fuzzer.support.lock import active_lock, locked_versions

NAME = "converters"
HELP = "list converters with their availability and library versions, and the locked stack against the installed one"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON object for scripts")
    parser.add_argument("--lock", type=Path, default=None,
                        help="compare with this lock file (default: the one `make install` installed from, else "
                             "fuzzer/support/stack.lock)")


def shown_path(path: Path) -> str:
    """A path relative to the working folder where it lies under it, else absolute."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        return str(resolved)


def stack_lines(lock: str, rows: list[StackRow]) -> list[str]:
    """The stack as the terminal shows it: library, locked, installed, MISMATCH where they differ."""
    width = max(len(r.library) for r in rows)
    locked_width = max(len(r.locked or "-") for r in rows)
    lines = [f"stack (lock: {lock}):"]
    for row in rows:
        mark = "" if row.agrees else "  MISMATCH"
        lines.append(f"  {row.library:<{width}}  locked {row.locked or '-':<{locked_width}}  installed "
                     f"{row.installed or 'nothing'}{mark}")
    bad = mismatches(rows)
    if bad:
        lines.append(f"{len(bad)} of {len(rows)} libraries differ from the lock: `make install` installs it")
    return lines


def _kind(info: ConverterInfo) -> str:
    """'exporter, pytorch -> onnxruntime'."""
    return f"{info.role}, {info.framework} -> {info.runtime}"


def run(args: argparse.Namespace) -> int:
    infos = list_converters()
    lock_path = args.lock if args.lock is not None else active_lock()
    rows = stack_rows(locked_versions(lock_path), libraries_under_test())
    if args.json:
        stack = [{**dataclasses.asdict(r), "agrees": r.agrees} for r in rows]
        print(json.dumps({"converters": [dataclasses.asdict(i) for i in infos],
                          "not_offered": [{"name": n, "reason": r} for n, r in NOT_OFFERED],
                          "stack": {"lock": shown_path(lock_path), "libraries": stack}}, indent=1))
        return 0
    width = max(len(name) for name in [*(i.name for i in infos), *(n for n, _ in NOT_OFFERED)])
    kind = max(len(_kind(i)) for i in infos)
    for info in infos:
        versions = ", ".join(f"{k} {v}" for k, v in info.versions.items())
        state = "available" if info.available else f"unavailable: {info.reason}"
        print(f"{info.name:<{width}}  {_kind(info):<{kind}}  {state}"
              + (f"  [{versions}]" if info.available and versions else ""))
    for name, reason in NOT_OFFERED:
        print(f"{name:<{width}}  not offered: {reason}")
    print()
    print("\n".join(stack_lines(shown_path(lock_path), rows)))
    return 0
