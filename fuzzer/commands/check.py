"""`convsmith check graph.json --converter NAME`: one graph through one converter, verdict with metrics."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuzzer.check.pipeline import ConverterUnavailable, run_check
from fuzzer.converters import CONVERTERS
from fuzzer.support.errors import UsageError
from generators.ir import Graph, GraphError, validate
from generators.registry import REGISTRY

NAME = "check"
HELP = "run one graph through one converter and print the verdict with its metrics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", type=Path, help="graph.json (from `convsmith generate` or a case folder)")
    parser.add_argument("--converter", required=True, help="see `convsmith converters`")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and the input search")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=JSON",
                        help="converter option, e.g. --option opset=17 (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def parse_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--option {pair!r} is not KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def load_graph(path: Path) -> Graph:
    """Read and validate a graph file, or raise UsageError with one line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        graph = Graph.loads(text)
        validate(graph, REGISTRY)
    except GraphError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return graph


def run(args: argparse.Namespace) -> int:
    if args.converter not in CONVERTERS:
        raise UsageError(f"unknown converter {args.converter!r}; known: {', '.join(CONVERTERS)}")
    graph = load_graph(args.graph)
    try:
        result = run_check(graph, args.seed, args.converter, parse_options(args.option))
    except ConverterUnavailable as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # bad converter option
        raise UsageError(str(exc)) from None
    verdict = result.verdict
    if args.json:
        print(json.dumps(verdict.to_json(), indent=1))
        return 0
    print(f"{verdict.symptom.json_name} at {verdict.stage.value} ({verdict.converter})")
    if verdict.signature:
        print(f"signature: {verdict.signature}")
    if verdict.message:
        print(f"message: {verdict.message}")
    if verdict.labels:
        print(f"labels: {', '.join(verdict.labels)}")
    if verdict.diverging_op:
        print(f"first diverging op: {verdict.diverging_op} ({verdict.diverging_dtype})")
    for i, m in enumerate(verdict.metrics):
        print(f"output {i}: {m.reason.value} dtype={m.dtype} max_abs={m.max_abs:.3g} max_rel={m.max_rel:.3g} "
              f"bad={m.n_bad}/{m.n_total} needed atol={m.needed.atol:.3g} rtol={m.needed.rtol:.3g}")
    timings = ", ".join(f"{k}={v * 1000:.0f}ms" for k, v in result.timings.items())
    print(f"timings: {timings}")
    return 0
