"""`convsmith ops`: every operator in the catalogue with its family, arity and dtypes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fuzzer.support.errors import UsageError
from fuzzer.support.quiet import library_output
from generators.registry import REGISTRY

NAME = "ops"
HELP = "list every operator with its family, the dtypes it accepts and its ONNX and TensorFlow counterparts"
# The counterpart columns of the table: the JSON key and the label shown where the operator has one.
SOURCE_COLUMNS = (("onnx", "onnx"), ("tensorflow", "tf"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", help=f"only this family (one of {', '.join(REGISTRY.families)})")
    parser.add_argument("--json", action="store_true", help="print a JSON list for scripts")
    parser.add_argument("--coverage", nargs="?", const="", default=None, metavar="DIR",
                        help="instead, list the ATen operators each exporter translates that no operator exercises; "
                             "given a campaign folder, also every rewrite each ONNX tool's installed library has, "
                             "with the tests of that campaign that fired it and found a bug")


def run(args: argparse.Namespace) -> int:
    if args.family is not None and args.family not in REGISTRY.families:
        raise UsageError(f"unknown family {args.family!r}; known: {', '.join(REGISTRY.families)}")
    if args.coverage is not None:
        return print_coverage(args.json, Path(args.coverage) if args.coverage else None, args.verbose)
    rows = [op for op in REGISTRY.values() if args.family in (None, op.family)]
    table = [{"name": op.name, "family": op.family, "inputs": op.arity,
              "dtypes": sorted({d.value for s in op.sigs for d in s.ins} | {s.out.value for s in op.sigs}),
              "onnx": op.onnx_since is not None, "tensorflow": op.has_tf_source()}
             for op in rows]
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    width = max((len(op.name) for op in rows), default=4)
    for row in table:
        sources = "  ".join(label if row[key] else "-" * len(label) for key, label in SOURCE_COLUMNS)
        print(f"{row['name']:<{width}}  {row['family']:<10}  inputs={row['inputs']}  {sources}  "
              f"{','.join(row['dtypes'])}")
    print(f"{len(rows)} operators, {sum(r['onnx'] for r in table)} with an ONNX counterpart, "
          f"{sum(r['tensorflow'] for r in table)} with a TensorFlow source")
    return 0


def print_coverage(as_json: bool, campaign: Path | None = None, verbose: bool = False) -> int:
    """Per exporter: how many of its ATen operators the catalogue exercises, and the public ones it does not; with a
    campaign, every rewrite of each ONNX tool and how often it fired. What the libraries print meanwhile (torch's
    registration warnings, TensorFlow's import notices) is shown only with -v."""
    if verbose:
        rewrites, rows = coverage_rows(campaign)
    else:
        with library_output():
            rewrites, rows = coverage_rows(campaign)
    if as_json:
        print(json.dumps({"aten": [{"converter": r.converter, "supported": len(r.supported),
                                    "exercised": len(r.exercised), "not_exercised": list(r.missing)} for r in rows],
                          "rewrites": None if rewrites is None else [r.to_json() for r in rewrites]}, indent=1))
        return 0
    for line in rewrite_lines(rewrites or []):
        print(line)
    for row in rows:
        print(f"{row.converter}: {len(row.exercised)} of {len(row.supported)} translated ATen operators exercised; "
              f"{len(row.missing)} public ones are not:")
        print("  " + " ".join(name.removeprefix("aten::") for name in row.missing))
    return 0


def coverage_rows(campaign: Path | None) -> tuple[list[Any] | None, list[Any]]:
    """The campaign's rewrite coverage (None without one) and each available exporter's ATen coverage."""
    from fuzzer.converters import CONVERTERS
    from fuzzer.converters.capabilities import AtenOps
    from fuzzer.converters.coverage import coverage, exercised_aten_ops

    rewrites = campaign_rewrites(campaign) if campaign is not None else None
    exporters = [c for c in CONVERTERS.values() if isinstance(c, AtenOps) and c.availability()[0]]
    return rewrites, coverage(exporters, exercised_aten_ops(REGISTRY))


def campaign_rewrites(folder: Path) -> list[Any]:
    """The rewrite coverage of the campaign in `folder` (bad input: not a campaign folder)."""
    from fuzzer.campaign.db import open_campaign
    from fuzzer.campaign.rewrites import coverage
    from fuzzer.converters import CONVERTERS

    db = open_campaign(folder)
    try:
        return coverage(db, CONVERTERS)
    finally:
        db.close()


def rewrite_lines(rows: list[Any]) -> list[str]:
    """Each tool's rewrites, one a line: fired in how many tests, in how many that found a bug; never fired last."""
    lines = []
    for row in rows:
        lines.append(f"{row.converter}, of the installed library's rewrites: {row.summary()}")
        for item in sorted(row.to_json()["rewrites"], key=lambda r: (bool(r["out_of_reach"]), -r["fired"], r["name"])):
            mark = ("" if item["known"] else "  (not in the library's list)") + (
                "  (quantized or integer graphs only)" if item["beyond_float"] else "") + (
                f"  (cannot fire here: {item['out_of_reach']})" if item["out_of_reach"] else "")
            lines.append(f"  {item['name']:<44} fired in {item['fired']:>6} tests, {item['failed']:>4} with a bug"
                         + mark)
            if item["classes"]:
                lines.append(f"    classes fired: {', '.join(item['classes'])}; never: "
                             + (", ".join(item["classes_never"]) or "none"))
        for bug in row.to_json()["pairs"].get("bug_classes", []):
            lines.append(f"  bug {bug['signature']}: every test that hit it fired "
                         + ", ".join(f"{p['rewrite']} on {p['class']}" for p in bug["pairs"]))
    return lines
