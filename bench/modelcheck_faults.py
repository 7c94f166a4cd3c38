"""How many planted faults `convsmith check MODEL` locates, diagnoses and repairs, on zoo models exported to ONNX.

    python bench/modelcheck_faults.py [--entries resnet,mobilenet-v2,inception-v3] [--faults 20] [--seed 0]

Each entry is built at seed 0 and exported by the TorchScript exporter; that model is the source. Faults are drawn at
random (from --seed) over the kinds: a perturbed weight and an initializer rounded to bfloat16 (parameter), an
attribute changed (hyperparameter: a Conv's pads, a Gemm's alpha, a LeakyRelu's alpha, a normalization's epsilon), a
node swapped for another kind or dropped (graph), the image input declared channels-last (input). Each faulty model
goes through the same repair as the command (fuzzer/modelcheck/repair.py). A fault is observable when the oracle
fails the faulty model; located when the first round names the planted node, as the first diverging node or as the
node its diagnosis is at (a fault below the tolerance at its node, beyond it further on), or, for an input fault,
finds one; diagnosed when the kind is right too; repaired when the repaired model passes on fresh inputs. Prints one
line per fault and the totals by kind, with the seconds of locate and repair."""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper

from fuzzer.converters import CONVERTERS
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.modelcheck.check_model import source_feeds
from fuzzer.modelcheck.conversions import torch_source
from fuzzer.modelcheck.diagnose import FaultKind
from fuzzer.modelcheck.loading import load_zoo
from fuzzer.modelcheck.repair import passes, repair
from fuzzer.support.quiet import library_output

SWAPS = {"Relu": "Sigmoid", "Add": "Sub", "Sigmoid": "Relu", "Mul": "Add", "Tanh": "Sigmoid", "Sub": "Add",
         "Div": "Mul", "MaxPool": "AveragePool", "AveragePool": "MaxPool", "Erf": "Tanh"}
UNARY = ("Relu", "Sigmoid", "Tanh", "Erf", "Clip", "HardSwish", "HardSigmoid")


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    what: str
    node: str  # the output of the node that should be located ('' for an input fault)
    also: tuple[str, ...] = ()  # other nodes as right: each reader of a dropped node's value, the first diverges
    also_kinds: tuple[FaultKind, ...] = ()  # other kinds as right: two faults of two kinds, either found first

    def named_in(self, named: set[str]) -> bool:
        """Whether one of the nodes to locate is among those a round named."""
        return bool(named & {self.node, *self.also})


def _float_inits(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT and
            int(np.prod(t.dims)) > 1]


def _first_reader(model: onnx.ModelProto, name: str) -> str:
    return next(n.output[0] for n in model.graph.node if name in n.input)


def perturb(model: onnx.ModelProto, rng: random.Random) -> Fault:
    tensor = rng.choice(_float_inits(model))
    array = numpy_helper.to_array(tensor).copy()
    array.flat[rng.randrange(array.size)] += 1.0
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return Fault(FaultKind.PARAMETER, f"perturb {tensor.name}", _first_reader(model, tensor.name))


def round_bf16(model: onnx.ModelProto, rng: random.Random) -> Fault:
    tensor = rng.choice(_float_inits(model))
    array = numpy_helper.to_array(tensor).astype(ml_dtypes.bfloat16).astype(np.float32)
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return Fault(FaultKind.PARAMETER, f"round {tensor.name} to bfloat16", _first_reader(model, tensor.name))


def transpose_weight(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """A weight with two axes of one size (a square kernel's height and width, a square matrix) transposed."""
    options = []
    for tensor in _float_inits(model):
        dims = list(tensor.dims)
        axes = (len(dims) - 2, len(dims) - 1) if len(dims) in (2, 4) and dims[-1] == dims[-2] > 1 else None
        if axes and not np.array_equal(numpy_helper.to_array(tensor), np.swapaxes(numpy_helper.to_array(tensor),
                                                                                  *axes)):
            options.append((tensor, axes))
    tensor, axes = rng.choice(options)
    tensor.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(np.swapaxes(numpy_helper.to_array(tensor), *axes)),
                                            tensor.name))
    return Fault(FaultKind.PARAMETER, f"transpose {tensor.name} axes {axes}", _first_reader(model, tensor.name))


def change_attribute(model: onnx.ModelProto, rng: random.Random) -> Fault:
    options: list[tuple[onnx.NodeProto, str, object]] = []
    for node in model.graph.node:
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "Conv" and "pads" in attrs and any(attrs["pads"].ints):
            options.append((node, "pads", [0] * len(attrs["pads"].ints)))
            options.append((node, "pads", None))  # dropped: ONNX's default is no padding
        if node.op_type in ("Gemm",):
            options.append((node, "alpha", 0.5))
        if node.op_type == "LeakyRelu":
            options.append((node, "alpha", 0.3))
        if node.op_type in ("LayerNormalization", "BatchNormalization"):
            options.append((node, "epsilon", 0.5))
    node, name, value = rng.choice(options)
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept if value is None else [*kept, helper.make_attribute(name, value)])
    what = f"drop {node.op_type} {name}" if value is None else f"{node.op_type} {name}={value}"
    return Fault(FaultKind.HYPERPARAMETER, what, node.output[0])


def swap_node(model: onnx.ModelProto, rng: random.Random) -> Fault:
    node = rng.choice([n for n in model.graph.node if n.op_type in SWAPS])
    old, node.op_type = node.op_type, SWAPS[node.op_type]
    return Fault(FaultKind.GRAPH, f"{old} {node.name} as {node.op_type}", node.output[0])


def drop_node(model: onnx.ModelProto, rng: random.Random) -> Fault:
    outputs = {o.name for o in model.graph.output}
    node = rng.choice([n for n in model.graph.node if n.op_type in UNARY and n.output[0] not in outputs])
    readers = [n.output[0] for n in model.graph.node if node.output[0] in n.input]
    for other in model.graph.node:
        other.input[:] = [node.input[0] if i == node.output[0] else i for i in other.input]
    model.graph.node.remove(node)
    return Fault(FaultKind.GRAPH, f"drop {node.op_type} {node.name}", readers[0], tuple(readers[1:]))


def channels_last(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """The image input declared in the other layout (channels-last for a channels-first model, as a Keras user's
    tool would take it, and the reverse for a Keras model's), transposed back inside the graph."""
    value = model.graph.input[0]
    dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
    if len(dims) != 4:
        raise IndexError("no image input")
    first = dims[1] in (1, 3) and dims[3] not in (1, 3)
    declared, perm = ([dims[0], dims[2], dims[3], dims[1]], [0, 3, 1, 2]) if first else \
        ([dims[0], dims[3], dims[1], dims[2]], [0, 2, 3, 1])
    inner = value.name + "_as_declared"
    for node in model.graph.node:
        node.input[:] = [inner if i == value.name else i for i in node.input]
    value.CopyFrom(helper.make_tensor_value_info(value.name, onnx.TensorProto.FLOAT, declared))
    model.graph.node.insert(0, helper.make_node("Transpose", [value.name], [inner], perm=perm))
    return Fault(FaultKind.INPUT, f"input {'channels-last' if first else 'channels-first'}", "")


PLANTERS: tuple[Callable[[onnx.ModelProto, random.Random], Fault], ...] = (
    perturb, round_bf16, change_attribute, swap_node, drop_node, channels_last, transpose_weight)


class PlantedTool(OnnxPassConverter):
    """One planter as an ONNX tool, for the command end to end: PYTHONPATH=bench convsmith check --zoo resnet
    --registry modelcheck_faults:TOOLS."""

    libraries = ("onnxruntime",)
    distributions = ("onnx", "onnxruntime")
    options_type = UpstreamOptions

    def __init__(self, planter: Callable[[onnx.ModelProto, random.Random], Fault], seed: int = 0) -> None:
        self.planter = planter
        self.seed = seed
        self.name = f"planted-{planter.__name__.replace('_', '-')}"

    def transform(self, model: onnx.ModelProto, options: UpstreamOptions) -> onnx.ModelProto:
        self.planter(model, random.Random(self.seed))
        return model


TOOLS = ConverterRegistry([PlantedTool(p) for p in PLANTERS])


def exported(entry: str) -> tuple[bytes, dict, dict]:
    model = load_zoo(entry, 0)
    with library_output():
        run = CONVERTERS["torch-onnx-script"].convert(torch_source(model).source, None)
    feeds, fresh = source_feeds(run.model, model, 0)
    return run.model, feeds, fresh


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", default="resnet,mobilenet-v2,inception-v3")
    parser.add_argument("--faults", type=int, default=20, help="faults per entry")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    totals: Counter[tuple[str, str]] = Counter()
    for entry in args.entries.split(","):
        source, feeds, fresh = exported(entry)
        rng = random.Random(f"{args.seed}:{entry}")
        for k in range(args.faults):
            planter = PLANTERS[k % len(PLANTERS)]
            model = onnx.load_from_string(source)
            try:
                fault = planter(model, rng)
            except IndexError:  # the model has no node this planter edits
                continue
            target = model.SerializeToString()
            kind = fault.kind.value
            if passes(source, target, feeds):
                totals[(kind, "unobservable")] += 1
                print(f"{entry:14} {kind:14} {fault.what:60} unobservable")
                continue
            start = time.perf_counter()
            with library_output():
                result = repair(source, target, feeds, fresh)
            seconds = time.perf_counter() - start
            first = result.rounds[0] if result.rounds else None
            named = {first.location.output} | {f.at for f in first.findings} if first and first.location else set()
            located = first is not None and (fault.named_in(named) if first.location else
                                             fault.kind is FaultKind.INPUT and bool(first.findings))
            diagnosed = located and first is not None and [f.kind for f in first.findings][:1] == [fault.kind]
            for label, hit in (("planted", True), ("located", located), ("diagnosed", diagnosed),
                               ("repaired", result.repaired)):
                totals[(kind, label)] += hit
            print(f"{entry:14} {kind:14} {fault.what:60} located={located!s:5} diagnosed={diagnosed!s:5} "
                  f"repaired={result.repaired!s:5} rounds={len(result.rounds)} {seconds:.2f}s")
    for kind in FaultKind:
        k = kind.value
        print(f"{k:14} planted {totals[(k, 'planted')]:3} located {totals[(k, 'located')]:3} diagnosed "
              f"{totals[(k, 'diagnosed')]:3} repaired {totals[(k, 'repaired')]:3} unobservable "
              f"{totals[(k, 'unobservable')]}")


if __name__ == "__main__":
    main()
