"""`convsmith zoo`: the zoo's real architectures (name, family, framework, parameters, inputs), and with `--check`
each named one built, exported by its framework's exporters and judged by the oracle."""

from __future__ import annotations

import argparse
import json
import sys

from fuzzer.commands.flags import names
from fuzzer.support.errors import CannotRun, Exit, UsageError
from fuzzer.support.quiet import library_output
from generators.zoo import Family, Framework, ZooEntry, ZooUnavailable
from generators.zoo.registry import ZOO

NAME = "zoo"
HELP = "list the zoo of real architectures (small configs, seeded random weights); --check runs some through " \
       "their exporters"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", choices=[f.value for f in Family], help="only this family")
    parser.add_argument("--framework", choices=[f.value for f in Framework], help="only this framework")
    parser.add_argument("--json", action="store_true", help="print a JSON list for scripts")
    parser.add_argument("--check", type=names, default=(), metavar="NAMES",
                        help="comma-separated entries to build, export and judge (exit 1 when a bug shows)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and inputs (with --check)")
    parser.add_argument("--dynamic", action="store_true",
                        help="with --check: the torch exporters mark the entry's dynamic axes (batch, sequence); "
                             "judged at the shape they were traced with")


def run(args: argparse.Namespace) -> int:
    if args.check:
        return check(args.check, args.seed, args.json, args.verbose, args.dynamic)
    family = Family(args.family) if args.family else None
    framework = Framework(args.framework) if args.framework else None
    entries = ZOO.select(family, framework)
    if args.json:
        print(json.dumps([row(e) for e in entries], indent=1))
        return Exit.OK
    width = max((len(e.name) for e in entries), default=4)
    for entry in entries:
        ok, _ = entry.available()
        print(f"{entry.name:<{width}}  {entry.family.value:<18}  {entry.framework.value:<7}  "
              f"{entry.parameters:>10,} params  {entry.describe_inputs()}{'' if ok else '  (needs the zoo extra)'}")
    unavailable = sum(not e.available()[0] for e in entries)
    print(f"{len(entries)} architectures in {len({e.family for e in entries})} families"
          + (f"; {unavailable} need the zoo extra (make install)" if unavailable else ""))
    return Exit.OK


def row(entry: ZooEntry) -> dict[str, object]:
    """An entry as the JSON listing writes it."""
    return {"name": entry.name, "family": entry.family.value, "framework": entry.framework.value,
            "parameters": entry.parameters, "inputs": [spec.to_json() for spec in entry.inputs],
            "outputs": list(entry.outputs), "tolerance": entry.tolerance.name.lower(), "summary": entry.summary,
            "available": entry.available()[0]}


def check(wanted: tuple[str, ...], seed: int, as_json: bool, verbose: bool, dynamic: bool = False) -> int:
    """Each named entry under each of its framework's exporters: one verdict a line (or a JSON list)."""
    from fuzzer.check.zoo import EXPORTERS, check_zoo, prepare_zoo
    from fuzzer.converters import CONVERTERS

    unknown = [n for n in wanted if n not in ZOO]
    if unknown:
        raise UsageError(f"unknown zoo entry: {', '.join(unknown)} (see `convsmith zoo`)")
    results = []
    for name in wanted:
        entry = ZOO[name]
        with library_output() as captured:
            try:
                prepared = prepare_zoo(entry.build(seed))
            except ZooUnavailable as exc:
                raise CannotRun(str(exc)) from None
            options = {"dynamic": True} if dynamic and entry.framework is Framework.PYTORCH else None
            for converter in EXPORTERS[entry.framework]:
                results.append(check_zoo(prepared, CONVERTERS[converter], options))
        if verbose and captured.text:
            sys.stderr.write(captured.text)
    if as_json:
        print(json.dumps([{"entry": r.entry, **r.verdict.to_json(), "timings": dict(r.timings)} for r in results],
                         indent=1))
    else:
        for r in results:
            verdict = r.verdict
            line = f"{r.entry}: {r.converter}: {verdict.symptom.json_name}"
            if verdict.symptom.is_bug or verdict.message:
                line += f" at {verdict.stage.value}: {verdict.message.splitlines()[0][:200]}"
            print(line)
    return Exit.BUG if any(r.verdict.is_bug for r in results) else Exit.OK
