"""`convsmith check MODEL` on the zoo's transformers with faults planted inside attention and normalization (issue
60, done-when 3): BERT (post-norm LayerNormalization, scaled dot-product attention) and Llama (RMSNorm written as
Pow, ReduceMean, Add of epsilon, Sqrt, Reciprocal; rotary embeddings; grouped-query attention), each exported by the
dynamo exporter, with planted ONNX tools on that model, through `check_model` as the command runs them.

    python bench/modelcheck_transformer.py [--forms bert,llama]

The faults, each in a node whose source layer (the dynamo exporter's name scopes) is an attention or normalization
module: a LayerNormalization's epsilon changed; the epsilon constant of RMSNorm changed; the attention scale constant
squared; the attention Softmax's axis changed; the attention residual Add swapped for Sub; the Sqrt of
RMSNorm dropped; the Neg of rotary's rotate_half dropped. Counted as modelcheck_fixcon.py counts them."""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Callable

import numpy as np
import onnx
from modelcheck_faults import Fault
from modelcheck_fixcon import describe, judged, plant, upstream_of
from onnx import helper, numpy_helper

from fuzzer.converters.registry import ConverterRegistry
from fuzzer.modelcheck.check_model import check_model, prepare, source_feeds
from fuzzer.modelcheck.diagnose import FaultKind
from fuzzer.modelcheck.loading import load_zoo
from fuzzer.modelcheck.locate import source_layer

ATTENTION = ("attention", "self_attn")
NORMALIZATION = ("LayerNorm", "layernorm", "norm")


def _in(node: onnx.NodeProto, parts: tuple[str, ...]) -> bool:
    layer = source_layer(node)
    return any(p in layer.rsplit(".", 1)[-1] or p in layer for p in parts)


def _nodes(model: onnx.ModelProto, op_type: str, parts: tuple[str, ...]) -> list[onnx.NodeProto]:
    found = [n for n in model.graph.node if n.op_type == op_type and _in(n, parts)]
    if not found:
        raise IndexError(f"no {op_type} in {parts}")
    return found


def _set_attribute(node: onnx.NodeProto, name: str, value: object) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute(name, value)])


def layernorm_epsilon(model: onnx.ModelProto, rng: random.Random) -> Fault:
    node = rng.choice(_nodes(model, "LayerNormalization", NORMALIZATION))
    _set_attribute(node, "epsilon", 0.5)
    return Fault(FaultKind.HYPERPARAMETER, f"{node.name} epsilon 1e-12 -> 0.5", node.output[0])


def rmsnorm_epsilon(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """The epsilon RMSNorm adds to the mean square (one constant the exporter shares among every RMSNorm)."""
    inits = {t.name: t for t in model.graph.initializer}
    adds = [n for n in _nodes(model, "Add", NORMALIZATION) if n.input[1] in inits and not inits[n.input[1]].dims]
    node = rng.choice(adds)
    tensor = inits[node.input[1]]
    tensor.CopyFrom(numpy_helper.from_array(np.array(0.1, numpy_helper.to_array(tensor).dtype), tensor.name))
    first = next(n for n in model.graph.node if tensor.name in n.input)
    return Fault(FaultKind.PARAMETER, f"RMSNorm epsilon {tensor.name} 1e-6 -> 0.1", first.output[0])


def attention_scale(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """The scale attention multiplies queries and keys by (d ** -0.25 each) squared, as if each took the whole
    1 / sqrt(d) (rounded to bfloat16 instead, it stayed within tolerance in every draw)."""
    inits = {t.name: t for t in model.graph.initializer}
    muls = [n for n in _nodes(model, "Mul", ATTENTION) if n.input[1] in inits and not inits[n.input[1]].dims]
    tensor = inits[rng.choice(muls).input[1]]
    value = numpy_helper.to_array(tensor)
    tensor.CopyFrom(numpy_helper.from_array((value * value).astype(value.dtype), tensor.name))
    first = next(n for n in model.graph.node if tensor.name in n.input)
    return Fault(FaultKind.PARAMETER, f"attention scale {tensor.name} squared", first.output[0])


def softmax_axis(model: onnx.ModelProto, rng: random.Random) -> Fault:
    node = rng.choice(_nodes(model, "Softmax", ATTENTION))
    _set_attribute(node, "axis", -2)
    return Fault(FaultKind.HYPERPARAMETER, f"attention {node.name} axis -1 -> -2", node.output[0])


def residual_sub(model: onnx.ModelProto, rng: random.Random) -> Fault:
    """The attention block's residual Add (its two inputs both computed) swapped for Sub."""
    node = rng.choice([n for n in _nodes(model, "Add", ("attention.output",))])
    node.op_type = "Sub"
    return Fault(FaultKind.GRAPH, f"attention residual {node.name} Add as Sub", node.output[0])


def _drop(model: onnx.ModelProto, node: onnx.NodeProto, what: str) -> Fault:
    readers = [n.output[0] for n in model.graph.node if node.output[0] in n.input]
    for other in model.graph.node:
        other.input[:] = [node.input[0] if i == node.output[0] else i for i in other.input]
    model.graph.node.remove(node)
    return Fault(FaultKind.GRAPH, what, readers[0], tuple(readers[1:]))


def rmsnorm_sqrt_dropped(model: onnx.ModelProto, rng: random.Random) -> Fault:
    node = rng.choice(_nodes(model, "Sqrt", NORMALIZATION))
    return _drop(model, node, f"RMSNorm {node.name} Sqrt dropped")


def rotary_neg_dropped(model: onnx.ModelProto, rng: random.Random) -> Fault:
    node = rng.choice(_nodes(model, "Neg", ATTENTION))
    return _drop(model, node, f"rotary {node.name} Neg dropped")


PLANTERS: dict[str, tuple[Callable[[onnx.ModelProto, random.Random], Fault], ...]] = {
    "bert": (layernorm_epsilon, attention_scale, softmax_axis, residual_sub),
    "llama": (rmsnorm_epsilon, attention_scale, softmax_axis, rmsnorm_sqrt_dropped, rotary_neg_dropped),
}

# Each planter's kind, for drawing them by kind (modelcheck_random.py).
KINDS: dict[str, FaultKind] = {
    "layernorm_epsilon": FaultKind.HYPERPARAMETER, "softmax_axis": FaultKind.HYPERPARAMETER,
    "rmsnorm_epsilon": FaultKind.PARAMETER, "attention_scale": FaultKind.PARAMETER,
    "residual_sub": FaultKind.GRAPH, "rmsnorm_sqrt_dropped": FaultKind.GRAPH, "rotary_neg_dropped": FaultKind.GRAPH,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forms", default="bert,llama")
    parser.add_argument("--tries", type=int, default=8)
    args = parser.parse_args()
    totals: Counter = Counter()
    print("| model | converter | fault planted | first round: located node -> kinds | node right | kind right | "
          "repaired | s |")
    print("|---|---|---|---|---|---|---|---|")
    for form in args.forms.split(","):
        model = load_zoo(form, 0)
        prepared = prepare(model)
        upstream = upstream_of(model, prepared)
        feeds, _ = source_feeds(upstream, model, 0)
        planted = [p for p in (plant(f, upstream, feeds, args.tries) for f in PLANTERS[form]) if p is not None]
        registry = ConverterRegistry([p.tool for p in planted])
        results = {r.conversion.converter: r for r in check_model(model, registry, (), 0, prepared=prepared)}
        for p in planted:
            result = results[p.tool.name]
            located, kind, repaired = judged(result, p.fault)
            totals["planted"] += 1
            totals["all"] += located and kind and repaired
            print(f"| {form} | {p.tool.name} (seed {p.tool.seed}) | {p.fault.kind.value}: {p.fault.what} | "
                  f"{describe(result)} | {'yes' if located else 'NO'} | {'yes' if kind else 'NO'} | "
                  f"{'yes' if repaired else 'NO'} | {result.repair_seconds:.2f} |")
        missing = len(PLANTERS[form]) - len(planted)
        if missing:
            print(f"<!-- {form}: {missing} planter(s) found no node or no observable draw -->")
    print(f"\n{totals['all']} of {totals['planted']} located at the planted node, diagnosed as the planted kind and "
          "repaired (passing the oracle on fresh inputs)")


if __name__ == "__main__":
    main()
