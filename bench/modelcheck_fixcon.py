"""The Fix-Con evaluation of `convsmith check MODEL`: the PyTorch and Keras forms of MobileNetV2, ResNet and
InceptionV3 from the zoo, each through every applicable converter, and faulty conversions planted through the
registry (ONNX tools on the exporter's model: the dynamo exporter's for PyTorch, tf2onnx's for Keras). A Keras form's
batch norms are calibrated first, and the model saved to a .keras file and checked from it (calibrated_keras).

    python bench/modelcheck_fixcon.py [--forms resnet,keras-resnet50,...] [--no-real] [--tries 8]

Each form gets five planted tools, one per Fix-Con kind: a perturbed or transposed weight (alternating by form), a
constant rounded to bfloat16 (ONNX Runtime has no float64 convolution, so the image models are float32 and a
float32 rounding would change nothing), a dropped or changed attribute, the image input declared in the other layout,
a swapped or missing node (alternating). A planter's draws are tried from seed 0 until the fault is observable (the
oracle fails the faulty model on the inputs); the draws passed over are counted. Each form also gets a planted
exporter (TorchScript's for PyTorch, tf2onnx's for Keras) that perturbs one weight of its model: located against the
source framework's own layers (forward hooks, Keras layer outputs) and repaired from its weights. All planted tools
and every real converter that applies then run through `check_model`, as `convsmith check --zoo FORM --registry ...`
runs them.
A planted fault is counted located when the first round names the planted node (the first diverging node, or the
node its diagnosis is at), or an input finding for a layout fault; kind right when the first finding's kind is the
planted one; repaired when the repaired model passed the oracle on the inputs and on fresh ones (check_model never
says repaired otherwise). Prints one row per conversion, then the totals."""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from modelcheck_faults import (
    Fault,
    PlantedTool,
    change_attribute,
    channels_last,
    drop_node,
    perturb,
    round_bf16,
    swap_node,
    transpose_weight,
)
from onnx import numpy_helper

from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.runtime import run_onnx_target
from fuzzer.converters.tf2onnx_exporter import Tf2Onnx, Tf2OnnxOptions, import_quietly
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript
from fuzzer.converters.upstream import export_upstream, upstream_default_opset
from fuzzer.modelcheck.check_model import ModelResult, check_model, prepare, source_feeds
from fuzzer.modelcheck.conversions import TOOL_UPSTREAM, applicable
from fuzzer.modelcheck.diagnose import FaultKind
from fuzzer.modelcheck.loading import load_model, load_zoo
from fuzzer.modelcheck.model import ModelKind, UserModel
from fuzzer.modelcheck.repair import passes
from fuzzer.support.quiet import library_output
from generators.ir import Graph

FORMS = ("mobilenet-v2", "resnet", "inception-v3", "keras-mobilenet-v2", "keras-resnet50", "keras-inception-v3")
Planter = Callable[[onnx.ModelProto, random.Random], Fault]


@dataclass(frozen=True)
class Planted:
    tool: PlantedTool
    fault: Fault
    passed_over: int  # draws whose fault the oracle did not see


def calibrated_keras(form: str, folder: Path) -> UserModel:
    """The Keras zoo entry with every batch norm's moving statistics set from a batch of 8 inputs (seed 1), as a
    trained model's are, saved as a .keras file and loaded as a user's file. The zoo draws them near (0, 1), which
    is far from the activations' own: the signal fades layer by layer, and the keras-mobilenet-v2 entry's output
    moved by 2e-9 between two unrelated inputs, so no fault before its head could show at the output."""
    tf_keras = import_quietly("tf_keras")
    keras = load_zoo(form, 0).keras
    shape = tuple(keras.inputs[0].shape[1:])
    batch = np.random.default_rng(1).standard_normal((8, *shape)).astype(np.float32)
    for bn in [layer for layer in keras.layers if isinstance(layer, tf_keras.layers.BatchNormalization)]:
        seen = np.asarray(tf_keras.Model(keras.inputs, bn.input)(batch, training=False))
        axes = tuple(range(seen.ndim - 1))
        stats = {"moving_mean": seen.mean(axis=axes), "moving_variance": seen.var(axis=axes)}
        bn.set_weights([stats.get(v.name.split("/")[-1].split(":")[0], w).astype(np.float32)
                        for v, w in zip(bn.weights, bn.get_weights(), strict=True)])
    path = folder / f"{form}.keras"
    with library_output():
        keras.save(path)
    return load_model(str(path), 0)


def _perturb_weight(model: onnx.ModelProto, seed: int) -> str:
    """The first output channel (row) of a float weight (a convolution's or a dense layer's) moved by 1, drawn from
    `seed`; its name."""
    tensor = random.Random(seed).choice([t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT
                                         and len(t.dims) in (2, 4)])
    array = numpy_helper.to_array(tensor).copy()
    array[0] += 1.0
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return tensor.name


class PerturbingTf2Onnx(Tf2Onnx):
    """tf2onnx, one weight of its model perturbed: located against Keras, at a Keras layer."""

    name = "planted-tf2onnx-weight"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def export_model(self, model: Any, graph: Graph, options: Tf2OnnxOptions) -> onnx.ModelProto:
        proto = super().export_model(model, graph, options)
        _perturb_weight(proto, self.seed)
        return proto


class PerturbingScript(TorchOnnxScript):
    """The TorchScript exporter, one weight of its model perturbed: located against the module, at a submodule."""

    name = "planted-torchscript-weight"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        model = onnx.load_from_string(super().convert_impl(source, options).model or b"")
        _perturb_weight(model, self.seed)
        return run_onnx_target(model, source)


def exporter_located(result: ModelResult, seed: int) -> tuple[bool, bool, bool]:
    """Located, kind right, repaired, for a planted exporter: located when the first diverging layer's node reads
    the perturbed weight or the diagnosis of that layer names it (the layer's last node stands for the layer: a
    convolution's ReLU after it)."""
    repair, target = result.repair, result.conversion.target_onnx
    first = repair.rounds[0] if repair and repair.rounds else None
    if first is None or first.location is None or target is None:
        return False, False, False
    model = onnx.load_from_string(target)
    planted = _perturb_weight(onnx.load_from_string(target), seed)  # the same draw names the same weight
    named = {getattr(f.edit, "name", "") for f in first.findings}
    located = planted in model.graph.node[first.location.index].input or planted in named
    kind = located and [f.kind for f in first.findings][:1] == [FaultKind.PARAMETER]
    return located, kind, repair.repaired


def upstream_of(model: UserModel, prepared: object) -> bytes:
    """The model every ONNX tool starts from: tf2onnx's (Keras), the dynamo exporter's (PyTorch)."""
    if model.kind is ModelKind.KERAS:
        return prepared.upstream.data  # type: ignore[attr-defined]
    with library_output():
        return export_upstream(prepared.source, TOOL_UPSTREAM, upstream_default_opset(TOOL_UPSTREAM), Steps()).data


def planters_for(index: int) -> tuple[Planter, ...]:
    """The five kinds, the weight and graph faults alternating by form."""
    weight = perturb if index % 2 == 0 else transpose_weight
    graph = swap_node if index % 2 == 0 else drop_node
    return weight, round_bf16, change_attribute, channels_last, graph


def plant(planter: Planter, upstream: bytes, feeds: dict, tries: int) -> Planted | None:
    """The first draw of `planter` whose fault the oracle sees, from seed 0."""
    for seed in range(tries):
        model = onnx.load_from_string(upstream)
        try:
            fault = planter(model, random.Random(seed))
        except IndexError:  # nothing of the kind in this model
            return None
        if not passes(upstream, model.SerializeToString(), feeds):
            return Planted(PlantedTool(planter, seed), fault, seed)
    return None


def judged(result: ModelResult, fault: Fault) -> tuple[bool, bool, bool]:
    """Located, kind right, repaired."""
    repair = result.repair
    first = repair.rounds[0] if repair and repair.rounds else None
    if first is None:
        return False, False, False
    named = ({first.location.output} | {f.at for f in first.findings}) if first.location else set()
    located = fault.named_in(named) if first.location else fault.kind is FaultKind.INPUT and bool(first.findings)
    kind = located and [f.kind for f in first.findings][:1] == [fault.kind]
    return located, kind, bool(repair and repair.repaired)


def describe(result: ModelResult) -> str:
    """The first round's located node and the kinds found, and why a repair failed where it did."""
    repair = result.repair
    first = repair.rounds[0] if repair and repair.rounds else None
    if repair is None or first is None:
        return "-"
    where = first.location
    node = f"{where.op_type} {where.node or where.output} [layer {where.layer or '?'}]" if where else "input"
    kinds = ",".join(f.kind.value for f in first.findings) or "none"
    return f"{node} -> {kinds}" + ("" if repair.repaired else f" ({repair.reason})")


def run_form(index: int, form: str, real: bool, tries: int, totals: Counter) -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        model = calibrated_keras(form, Path(folder)) if form.startswith("keras-") else load_zoo(form, 0)
    prepared = prepare(model)
    upstream = upstream_of(model, prepared)
    feeds, _ = source_feeds(upstream, model, 0)
    planted = [p for p in (plant(f, upstream, feeds, tries) for f in planters_for(index)) if p is not None]
    reals = [c.name for c in applicable(model, CONVERTERS)] if real else []
    exporter = PerturbingTf2Onnx(index) if model.kind is ModelKind.KERAS else PerturbingScript(index)
    registry = ConverterRegistry([*(CONVERTERS[n] for n in reals), *(p.tool for p in planted), exporter])
    results = {r.conversion.converter: r for r in check_model(model, registry, (), 0, prepared=prepared)}
    exported = results[exporter.name]
    if exported.conversion.verdict.is_bug:
        located, kind, repaired = exporter_located(exported, index)
        for label, hit in (("planted", True), ("located", located), ("kind", kind), ("repaired", repaired),
                           ("all", located and kind and repaired)):
            totals[("parameter", label)] += hit
        print(f"| {form} | {exporter.name} (seed {index}) | parameter: a weight perturbed by the exporter | "
              f"{describe(exported)} | {'yes' if located else 'NO'} | {'yes' if kind else 'NO'} | "
              f"{'yes' if repaired else 'NO'} | {exported.repair_seconds:.2f} |")
    else:
        print(f"<!-- {form}: {exporter.name}'s perturbed weight was not observable -->")
    for p in planted:
        result = results[p.tool.name]
        located, kind, repaired = judged(result, p.fault)
        for label, hit in (("planted", True), ("located", located), ("kind", kind), ("repaired", repaired),
                           ("all", located and kind and repaired)):
            totals[(p.fault.kind.value, label)] += hit
        totals[("passed over", "draws")] += p.passed_over
        print(f"| {form} | {p.tool.name} (seed {p.tool.seed}) | {p.fault.kind.value}: {p.fault.what[:60]} | "
              f"{describe(result)} | {'yes' if located else 'NO'} | {'yes' if kind else 'NO'} | "
              f"{'yes' if repaired else 'NO'} | {result.repair_seconds:.2f} |")
    for name in reals:
        result = results[name]
        verdict = result.conversion.verdict
        totals[("real", "wrong" if verdict.is_bug else "ok")] += 1
        state = "-" if result.repair is None else ("yes" if result.repair.repaired else "NO")
        print(f"| {form} | {name} | real: {verdict.symptom.json_name} | {describe(result)} | - | - | {state} | "
              f"{result.repair_seconds:.2f} |")
    print(f"<!-- {form}: {time.perf_counter() - start:.0f} s -->", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--no-real", action="store_true", help="planted tools only, no real converter")
    parser.add_argument("--tries", type=int, default=8, help="draws per planter until its fault is observable")
    args = parser.parse_args()
    totals: Counter = Counter()
    print("| form | converter | fault planted | first round: located node -> kinds | node right | kind right | "
          "repaired | s |")
    print("|---|---|---|---|---|---|---|---|")
    for form in args.forms.split(","):
        run_form(FORMS.index(form) if form in FORMS else 0, form, not args.no_real, args.tries, totals)
    print()
    for kind in FaultKind:
        k = kind.value
        print(f"{k:14} planted {totals[(k, 'planted')]:3} located {totals[(k, 'located')]:3} kind right "
              f"{totals[(k, 'kind')]:3} repaired {totals[(k, 'repaired')]:3} all three {totals[(k, 'all')]:3}")
    print(f"draws passed over as unobservable: {totals[('passed over', 'draws')]}; real conversions: "
          f"{totals[('real', 'ok')]} pass, {totals[('real', 'wrong')]} wrong")


if __name__ == "__main__":
    main()
