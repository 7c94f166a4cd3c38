"""`convsmith check graph.json --converters a,b`: one graph through each converter, verdicts with metrics; or
`convsmith check MODEL` (an .onnx file, `package.module:factory`, `--zoo NAME`): a user's model, its first wrong node
located, diagnosed and repaired (fuzzer/commands/check_model.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fuzzer.cases.case_json import CASE_JSON
from fuzzer.check.pipeline import CheckResult, available_converter, run_check
from fuzzer.commands.check_model import is_model, run_model
from fuzzer.commands.flags import DEFAULT_CORPUS, duration, names, registry_named
from fuzzer.converters import DEFAULT_REGISTRY
from fuzzer.modelcheck.failure_case import REDUCE_BUDGET_S
from fuzzer.support.errors import Exit, UsageError
from fuzzer.support.quiet import library_output
from generators.ir import Graph, GraphError, validate
from generators.registry import REGISTRY

NAME = "check"
HELP = ("run one graph, or your own model (ONNX file, Keras file or SavedModel folder, package.module:factory, --zoo "
        "NAME), through converters and "
        "print each verdict; for a model, locate, diagnose and repair a wrong conversion (exit 1 when a bug shows)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", type=Path, nargs="?",
                        help="graph.json (from `convsmith generate`), a case folder or its case.json; or a model: "
                             "an .onnx file, a .keras or .h5 file or SavedModel folder, or package.module:factory "
                             "(returning the module and example inputs)")
    parser.add_argument("--converters", type=names, default=None,
                        help="comma-separated converters (see `convsmith converters`); for a model, default: every "
                             "one that applies")
    parser.add_argument("--zoo", default=None, metavar="NAME",
                        help="a PyTorch or Keras zoo entry as the model (see `convsmith zoo`)")
    parser.add_argument("--inputs", type=Path, default=None,
                        help="a model's inputs as an .npz (by input name or in order); default: drawn from its spec")
    parser.add_argument("--out", type=Path, default=None,
                        help="a model's folder: verdicts.json, summary.md, each wrong converter's converted.onnx, "
                             "when re-verified repaired.onnx, and an ONNX tool's failure reduced to a case folder")
    parser.add_argument("--no-repair", action="store_true", help="a model's verdicts only: no locate or repair")
    parser.add_argument("--no-reduce", action="store_true",
                        help="with --out: no reduced case of an ONNX tool's failure (by default each is cut to its "
                             "smallest failing subgraph, a case folder with a repro.py to file upstream)")
    parser.add_argument("--reduce-budget", type=duration, default=REDUCE_BUDGET_S, metavar="DURATION",
                        help="a model's reduction per converter: no larger cut is tried past it (default: 60s)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="a model's failures with the root cause of one of these cases are known (default: "
                             "corpus/)")
    parser.add_argument("--campaign", type=Path, default=None, metavar="DIR",
                        help="a model's failures with the root cause of one of this campaign's are known too")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY, metavar="MODULE:ATTR",
                        help="where the converters are found (default: convsmith's own)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed for weights and the input search (default: a case's own, else 0)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=JSON",
                        help="converter option for every converter named, e.g. --option opset=17 (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the verdicts as a JSON list")


def parse_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {pair!r} is not KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def load_graph(path: Path) -> tuple[Graph, int | None]:
    """A graph file's graph, or a case's (its folder or its case.json) with the case's seed; UsageError with one line
    for anything else."""
    file = path / CASE_JSON if path.is_dir() else path
    try:
        text = file.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{file}: not a text file (a graph.json or a case folder was expected)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{file}: not JSON: {exc}") from None
    case = isinstance(data, dict) and "graph" in data and "signature" in data
    try:
        graph = Graph.from_json(data["graph"] if case else data)
        validate(graph, REGISTRY)
    except GraphError as exc:
        raise UsageError(f"{file}: {'the case graph: ' if case else ''}{exc}") from None
    seed = data.get("seed") if case else None
    return graph, seed if isinstance(seed, int) else None


def run(args: argparse.Namespace) -> int:
    if is_model(args):
        return run_model(args)
    if args.graph is None:
        raise UsageError("name a graph.json, a case folder, a model or --zoo NAME")
    if args.converters is None:
        raise UsageError("--converters is required for a graph or case")
    graph, case_seed = load_graph(args.graph)
    seed = args.seed if args.seed is not None else (case_seed or 0)
    options = parse_options(args.option)
    registry = registry_named(args.registry)
    if not args.converters:
        raise UsageError("--converters names no converter")
    unknown = [name for name in args.converters if name not in registry]
    if unknown:
        raise UsageError(f"unknown converter(s): {', '.join(unknown)} (known: {', '.join(registry)})")
    for name in args.converters:  # every option and converter is checked before anything runs
        try:
            registry[name].options(options)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{name}: {exc}") from None
        available_converter(name, registry)
    results = []
    for name in args.converters:
        with library_output() as captured:
            results.append(run_check(graph, seed, name, options, registry=registry))
        if args.verbose and captured.text:
            sys.stderr.write(captured.text)
    if args.json:
        print(json.dumps([{**r.verdict.to_json(), "seed": seed, "timings": dict(r.timings)} for r in results],
                         indent=1))
    else:
        for result in results:
            print_verdict(result)
    return Exit.BUG if any(r.verdict.is_bug for r in results) else Exit.OK


def print_verdict(result: CheckResult) -> None:
    verdict = result.verdict
    print(f"{verdict.converter}: {verdict.symptom.json_name} at {verdict.stage.value}")
    if verdict.signature:
        print(f"  signature: {verdict.signature}")
    if verdict.message:
        print(f"  message: {verdict.message.splitlines()[0][:300]}")
    if verdict.labels:
        print(f"  labels: {', '.join(verdict.labels)}")
    if verdict.diverging_op:
        print(f"  first diverging op: {verdict.diverging_op} ({verdict.diverging_dtype})")
    for i, m in enumerate(verdict.metrics):
        print(f"  output {i}: {m.reason.value} dtype={m.dtype} max_abs={m.max_abs:.3g} max_rel={m.max_rel:.3g} "
              f"bad={m.n_bad}/{m.n_total} needed atol={m.needed.atol:.3g} rtol={m.needed.rtol:.3g}")
    print("  timings: " + ", ".join(f"{k}={v * 1000:.0f}ms" for k, v in result.timings.items()))
