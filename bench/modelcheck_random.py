"""Faults drawn at random over the kinds and over the zoo's image and transformer models, through `convsmith check
MODEL`'s repair (issue 60, done-when 2): the share located, diagnosed and repaired, and the miss list by kind.

    python bench/modelcheck_random.py [--entries ...] [--faults 15] [--seed 0] [--set plain|hard|both]

The source of each entry is the model the ONNX tools start from in the command: the dynamo exporter's for a PyTorch
entry, tf2onnx's for a Keras entry (its batch norms calibrated first: modelcheck_fixcon.calibrated_keras). Each fault
draws a kind uniformly, then a planter of that kind that finds something to edit in the model, then its seed.

The plain set is modelcheck_faults.py's (a weight perturbed by 1, transposed, rounded to bfloat16; a Conv's pads, a
Gemm's alpha, a normalization's epsilon; a node swapped or dropped; the image input in the other layout) and, on the
transformers, modelcheck_transformer.py's (in attention and normalization). Those are easy: one edit, large, at a node
that keeps its value names. The hard set: a whole weight scaled by 1.02 (close to the tolerance); a stride-1
convolution given stride 2 (every later shape changes, so the model may fail to run past it); a Concat's inputs
reordered and a Sub's or Div's operands swapped (the node keeps its kind); a 2-D input declared transposed (token
ids); two faults at once (a perturbed weight and a swapped node: the repair needs two rounds); a perturbed weight in a
model whose every intermediate value the tool renamed (nothing is shared by name to compare until check MODEL names
them back by aligning the two node sequences: align.py); RMSNorm fused into one node with a wrong epsilon.

Counted as modelcheck_faults.py counts: observable when the oracle fails the faulty model; located when the first
round names a planted node (or finds an input fault for an input fault); diagnosed when its first finding is the
planted kind; repaired when the repaired model passed the oracle on the inputs and on fresh ones."""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from modelcheck_faults import (
    Fault,
    change_attribute,
    channels_last,
    drop_node,
    perturb,
    round_bf16,
    swap_node,
    transpose_weight,
)
from modelcheck_fixcon import calibrated_keras, upstream_of
from modelcheck_transformer import KINDS as TRANSFORMER_KINDS
from modelcheck_transformer import PLANTERS as TRANSFORMER_PLANTERS
from onnx import helper, numpy_helper

from fuzzer.modelcheck.check_model import prepare, source_feeds
from fuzzer.modelcheck.diagnose import FaultKind
from fuzzer.modelcheck.loading import load_zoo
from fuzzer.modelcheck.repair import passes, repair
from fuzzer.support.quiet import library_output

ENTRIES = ("resnet", "mobilenet-v2", "inception-v3", "keras-mobilenet-v2", "keras-resnet50", "keras-inception-v3",
           "bert", "llama")
Planter = Callable[[onnx.ModelProto, random.Random], Fault]


def _float_weights(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) >= 2]


def _reader(model: onnx.ModelProto, name: str) -> str:
    return next(n.output[0] for n in model.graph.node if name in n.input)


def scale_weight(model: onnx.ModelProto, rng: random.Random) -> Fault:
    tensor = rng.choice(_float_weights(model))
    tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) * np.float32(1.02), tensor.name))
    return Fault(FaultKind.PARAMETER, f"scale {tensor.name} by 1.02", _reader(model, tensor.name))


def conv_stride(model: onnx.ModelProto, rng: random.Random) -> Fault:
    convs = [n for n in model.graph.node if n.op_type == "Conv" and
             any(a.name == "strides" and list(a.ints) == [1, 1] for a in n.attribute) and
             any(a.name == "kernel_shape" and max(a.ints) > 1 for a in n.attribute)]
    node = rng.choice(convs)
    kept = [a for a in node.attribute if a.name != "strides"]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute("strides", [2, 2])])
    return Fault(FaultKind.HYPERPARAMETER, f"Conv {node.name} strides 1 -> 2", node.output[0])


def reorder_operands(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """A Concat's inputs rotated, or a Sub's or Div's two computed operands swapped."""
    computed = {o for n in model.graph.node for o in n.output}
    nodes = [n for n in model.graph.node if (n.op_type == "Concat" and len(set(n.input)) > 1) or
             (n.op_type in ("Sub", "Div") and len(n.input) == 2 and n.input[0] != n.input[1] and
              all(i in computed for i in n.input))]
    node = rng.choice(nodes)
    node.input[:] = [*node.input[1:], node.input[0]]
    return Fault(FaultKind.GRAPH, f"{node.op_type} {node.name} operands reordered", node.output[0])


def transposed_input(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """A 2-D input (token ids) declared with its axes swapped, transposed back inside the graph."""
    value = rng.choice([v for v in model.graph.input if len(v.type.tensor_type.shape.dim) == 2 and
                        len({d.dim_value for d in v.type.tensor_type.shape.dim}) == 2])
    dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
    inner = value.name + "_as_declared"
    for node in model.graph.node:
        node.input[:] = [inner if i == value.name else i for i in node.input]
    value.CopyFrom(helper.make_tensor_value_info(value.name, value.type.tensor_type.elem_type, dims[::-1]))
    model.graph.node.insert(0, helper.make_node("Transpose", [value.name], [inner], perm=[1, 0]))
    return Fault(FaultKind.INPUT, f"input {value.name} declared transposed", "")


def two_faults(model: onnx.ModelProto, rng: random.Random) -> Fault:
    first = perturb(model, rng)
    second = swap_node(model, rng)
    return Fault(FaultKind.PARAMETER, f"{first.what}; {second.what}", first.node, (second.node,), (FaultKind.GRAPH,))


def renamed(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """A perturbed weight, and every value between the graph's inputs and outputs renamed."""
    fault = perturb(model, rng)
    keep = {v.name for v in model.graph.input} | {v.name for v in model.graph.output} | \
        {t.name for t in model.graph.initializer}
    names = {o: f"t{i}" for i, o in enumerate(o for n in model.graph.node for o in n.output if o and o not in keep)}
    for node in model.graph.node:
        node.input[:] = [names.get(i, i) for i in node.input]
        node.output[:] = [names.get(o, o) for o in node.output]
    # The node by either name: check MODEL names a renamed model's values back after the source's.
    return Fault(FaultKind.PARAMETER, f"{fault.what}, values renamed", fault.node, (names.get(fault.node, ""),))


def fused_rmsnorm(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """A tool's fusion gone wrong: RMSNorm's seven nodes (Pow, ReduceMean, Add of epsilon, Sqrt, Reciprocal, Mul,
    Mul by the weight) fused into ONNX Runtime's SimplifiedLayerNormalization with epsilon 0.1 where the source adds
    1e-6. The fused node has no twin of its kind in the source: the epsilon is not diagnosed as a hyperparameter."""
    nodes = list(model.graph.node)
    starts = [i for i, n in enumerate(nodes[:-6]) if [m.op_type for m in nodes[i:i + 7]] ==
              ["Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul", "Mul"]]
    at = rng.choice(starts)
    chain = nodes[at:at + 7]
    x, weight = chain[0].input[0], next(i for i in chain[6].input if i != chain[5].output[0])
    fused = helper.make_node("SimplifiedLayerNormalization", [x, weight], [chain[6].output[0]], domain="com.microsoft",
                             axis=-1, epsilon=0.1, name=f"fused_{chain[6].name}")
    for node in chain:
        model.graph.node.remove(node)
    model.graph.node.insert(at, fused)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return Fault(FaultKind.HYPERPARAMETER, f"RMSNorm fused as {fused.name}, epsilon 0.1", chain[6].output[0])


PLAIN: dict[FaultKind, tuple[Planter, ...]] = {
    FaultKind.INPUT: (channels_last,),
    FaultKind.PARAMETER: (perturb, transpose_weight, round_bf16),
    FaultKind.HYPERPARAMETER: (change_attribute,),
    FaultKind.GRAPH: (swap_node, drop_node),
}
HARD: dict[FaultKind, tuple[Planter, ...]] = {
    FaultKind.INPUT: (transposed_input,),
    FaultKind.PARAMETER: (scale_weight, two_faults, renamed),
    FaultKind.HYPERPARAMETER: (conv_stride, fused_rmsnorm),
    FaultKind.GRAPH: (reorder_operands,),
}


def planters(entry: str, which: str) -> dict[FaultKind, tuple[Planter, ...]]:
    sets = {"plain": [PLAIN], "hard": [HARD], "both": [PLAIN, HARD]}[which]
    table: dict[FaultKind, tuple[Planter, ...]] = {k: sum((s[k] for s in sets), ()) for k in FaultKind}
    if which != "hard":
        for planter in TRANSFORMER_PLANTERS.get(entry, ()):
            kind = TRANSFORMER_KINDS[planter.__name__]
            table[kind] = (*table[kind], planter)
    return table


def source_of(entry: str, folder: Path) -> tuple[bytes, dict, dict]:
    model = calibrated_keras(entry, folder) if entry.startswith("keras-") else load_zoo(entry, 0)
    upstream = upstream_of(model, prepare(model))
    feeds, fresh = source_feeds(upstream, model, 0)
    return upstream, feeds, fresh


def draw(table: dict[FaultKind, tuple[Planter, ...]], source: bytes, rng: random.Random
         ) -> tuple[Planter, Fault, bytes] | None:
    """A kind, then a planter of it that finds something to edit, then its seed; None when no kind has one."""
    kinds = [k for k in FaultKind if table[k]]
    for _ in range(20):
        planter = rng.choice(table[rng.choice(kinds)])
        model = onnx.load_from_string(source)
        try:
            fault = planter(model, random.Random(rng.randrange(1 << 30)))
        except (IndexError, StopIteration):  # nothing of its kind in this model
            continue
        return planter, fault, model.SerializeToString()
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", default=",".join(ENTRIES))
    parser.add_argument("--faults", type=int, default=15, help="faults per entry")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", default="both", choices=("plain", "hard", "both"))
    args = parser.parse_args()
    totals: Counter = Counter()
    misses: list[str] = []
    seconds: list[float] = []
    for entry in args.entries.split(","):
        with tempfile.TemporaryDirectory() as folder:
            source, feeds, fresh = source_of(entry, Path(folder))
        rng = random.Random(f"{args.seed}:{entry}")
        table = planters(entry, args.set)
        for _ in range(args.faults):
            drawn = draw(table, source, rng)
            if drawn is None:
                break
            planter, fault, target = drawn
            kind = fault.kind.value
            if passes(source, target, feeds):
                totals[(kind, "unobservable")] += 1
                print(f"{entry:18} {kind:14} {fault.what[:70]:70} unobservable")
                continue
            start = time.perf_counter()
            with library_output():
                result = repair(source, target, feeds, fresh)
            seconds.append(time.perf_counter() - start)
            first = result.rounds[0] if result.rounds else None
            named = ({first.location.output} | {f.at for f in first.findings}) if first and first.location else set()
            located = first is not None and (fault.named_in(named) if first.location else
                                             fault.kind is FaultKind.INPUT and bool(first.findings))
            diagnosed = located and first is not None and bool(first.findings) and \
                first.findings[0].kind in (fault.kind, *fault.also_kinds)
            for label, hit in (("planted", True), ("located", located), ("diagnosed", diagnosed),
                               ("repaired", result.repaired), ("all", located and diagnosed and result.repaired)):
                totals[(kind, label)] += hit
            if not (located and diagnosed and result.repaired):
                misses.append(f"{kind}: {entry} {planter.__name__}: {fault.what[:90]} (located={located}, "
                              f"diagnosed={diagnosed}, repaired={result.repaired}: {result.reason})")
            print(f"{entry:18} {kind:14} {fault.what[:70]:70} located={located!s:5} diagnosed={diagnosed!s:5} "
                  f"repaired={result.repaired!s:5} rounds={len(result.rounds)} {seconds[-1]:.2f}s", flush=True)
    print()
    for kind in FaultKind:
        k = kind.value
        print(f"{k:14} observable {totals[(k, 'planted')]:3} located {totals[(k, 'located')]:3} diagnosed "
              f"{totals[(k, 'diagnosed')]:3} repaired {totals[(k, 'repaired')]:3} all three {totals[(k, 'all')]:3} "
              f"unobservable {totals[(k, 'unobservable')]}")
    planted = sum(totals[(k.value, "planted")] for k in FaultKind)
    done = sum(totals[(k.value, "all")] for k in FaultKind)
    print(f"all three: {done} of {planted} observable faults ({100 * done / max(planted, 1):.0f}%); locate, diagnose "
          f"and repair median {np.median(seconds) if seconds else 0:.2f} s, max {max(seconds, default=0):.2f} s")
    print("misses:")
    for line in sorted(misses):
        print(f"  {line}")


if __name__ == "__main__":
    main()
