"""`convsmith check MODEL`: the user's model (an ONNX file, a Keras file or SavedModel folder,
`package.module:factory`, `--zoo NAME`) through every
applicable converter, with the first wrong node, its diagnosis and the re-verified repair (fuzzer/modelcheck)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuzzer.cases.known_causes import KnownCause, corpus_causes
from fuzzer.commands.flags import registry_named
from fuzzer.modelcheck.check_model import ModelResult, check_model
from fuzzer.modelcheck.filing import Filing, file_results
from fuzzer.modelcheck.folder import repair_lines, result_json, write_folder
from fuzzer.modelcheck.keras_model import is_keras_path
from fuzzer.modelcheck.loading import load_model, load_zoo
from fuzzer.modelcheck.model import UserModel, read_inputs
from fuzzer.support.errors import Exit, UsageError
from fuzzer.triage.campaign_causes import campaign_causes


def is_model(args: argparse.Namespace) -> bool:
    """Whether the command names a user's model rather than a graph or case: --zoo, an .onnx file, a Keras file
    or SavedModel folder, or a `package.module:factory` that is no file."""
    target = args.graph
    if args.zoo:
        return True
    if target is None:
        return False
    text = str(target)
    return text.endswith(".onnx") or is_keras_path(Path(text)) or (":" in text and not Path(text).exists())


def load(args: argparse.Namespace, seed: int) -> UserModel:
    if args.zoo and args.graph is not None:
        raise UsageError("name either a model or --zoo, not both")
    model = load_zoo(args.zoo, seed) if args.zoo else load_model(str(args.graph), seed)
    return read_inputs(model, args.inputs) if args.inputs else model


def run_model(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else 0
    model = load(args, seed)
    registry = registry_named(args.registry)
    unknown = [name for name in args.converters or () if name not in registry]
    if unknown:
        raise UsageError(f"unknown converter(s): {', '.join(unknown)} (known: {', '.join(registry)})")
    known = known_causes(args.corpus, args.campaign)  # read first: a campaign that is none is bad input
    results = check_model(model, registry, args.converters or (), seed, fix=not args.no_repair)
    cases_in = args.out if args.out and not args.no_reduce else None
    filings = file_results(model, results, registry, seed, known, cases_in, args.reduce_budget)
    if args.out:
        write_folder(args.out, model, results, filings)
    if args.json:
        print(json.dumps([result_json(r, filings) for r in results], indent=1))
    else:
        for result in results:
            print_result(result, filings.get(result.conversion.converter))
    return Exit.BUG if any(r.conversion.verdict.is_bug for r in results) else Exit.OK


def known_causes(corpus: Path, campaign: Path | None) -> dict[str, KnownCause]:
    """The corpus's root causes, and the campaign's where one is named (the corpus's case stands for a key both
    have)."""
    found = campaign_causes(campaign) if campaign is not None else {}
    return {**found, **corpus_causes(corpus)}


def print_result(result: ModelResult, filing: Filing | None) -> None:
    verdict = result.conversion.verdict
    print(f"{verdict.converter}: {verdict.symptom.json_name} at {verdict.stage.value}")
    if verdict.message:
        print(f"  message: {verdict.message.splitlines()[0][:300]}")
    for line in [*repair_lines(result), *(filing.lines() if filing is not None else [])]:
        print("  " + line[2:])
