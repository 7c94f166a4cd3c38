"""`convsmith generate`: one graph from a seed, written as graph.json, graph.dot and the inputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from fuzzer.commands.flags import add_generator_arguments, generator_options
from fuzzer.support.errors import UsageError
from fuzzer.support.files import atomic_write_bytes, atomic_write_text
from fuzzer.support.tensors import to_proto_bytes
from generators.dot import to_dot
from generators.generator import GenerationError, generate
from generators.materialize import materialize
from generators.valid_inputs import find_valid_inputs

NAME = "generate"
HELP = "generate one graph from a seed and write graph.json, graph.dot and NaN-free inputs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="output folder (created)")
    add_generator_arguments(parser)


def run(args: argparse.Namespace) -> int:
    opts = generator_options(args)
    try:
        graph = generate(args.seed, opts)
    except GenerationError as exc:
        raise UsageError(f"no graph for seed {args.seed}: {exc}") from None
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {args.out}: {exc.strerror}") from None
    module = materialize(graph, args.seed)
    found = find_valid_inputs(module, args.seed)
    atomic_write_text(args.out / "graph.json", graph.dumps())
    atomic_write_text(args.out / "graph.dot", to_dot(graph))
    data = args.out / "test_data_set_0"
    data.mkdir(exist_ok=True)
    for i, (name, value) in enumerate(found.inputs.items()):
        atomic_write_bytes(data / f"input_{i}.pb", to_proto_bytes(name, value))
    state = "valid" if found.valid else "NOT valid (NaN/Inf remain)"
    print(f"seed {args.seed}: {len(graph.nodes)} nodes, {len(graph.inputs)} inputs, {len(graph.outputs)} outputs, "
          f"inputs {state} after {found.steps} steps -> {args.out}")
    return 0
