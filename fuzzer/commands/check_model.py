"""`convsmith check MODEL`: the user's model (an ONNX file, a Keras file or SavedModel folder,
`package.module:factory`, `--zoo NAME`) through every
applicable converter, with the first wrong node, its diagnosis and the re-verified repair (fuzzer/modelcheck)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuzzer.commands.flags import registry_named
from fuzzer.modelcheck.check_model import ModelResult, check_model
from fuzzer.modelcheck.folder import repair_lines, write_folder
from fuzzer.modelcheck.keras_model import is_keras_path
from fuzzer.modelcheck.loading import load_model, load_zoo
from fuzzer.modelcheck.model import UserModel, read_inputs
from fuzzer.support.errors import Exit, UsageError


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
    results = check_model(model, registry, args.converters or (), seed, fix=not args.no_repair)
    if args.out:
        write_folder(args.out, model, results)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
    else:
        for result in results:
            print_result(result)
    return Exit.BUG if any(r.conversion.verdict.is_bug for r in results) else Exit.OK


def print_result(result: ModelResult) -> None:
    verdict = result.conversion.verdict
    print(f"{verdict.converter}: {verdict.symptom.json_name} at {verdict.stage.value}")
    if verdict.message:
        print(f"  message: {verdict.message.splitlines()[0][:300]}")
    for line in repair_lines(result):
        print("  " + line[2:])
