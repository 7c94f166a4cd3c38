"""Each applicable converter on the user's model, judged by the oracle: an ONNX model goes through the ONNX-to-ONNX
tools and the importers as their upstream model (seeded into the Source's shared exports, as the native model is); a
PyTorch module through the exporters, and through the ONNX tools starting from an exporter's model."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from fuzzer.check.zoo_source import float64_outputs
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import RuntimeOptimizer
from fuzzer.converters.conversion import SharedExport, Source, StageError, TargetRun, UpstreamError
from fuzzer.converters.native import NATIVE
from fuzzer.converters.onnx2tf_importer import Onnx2Tf
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import optimized_model
from fuzzer.converters.upstream import cached_upstream, upstream_default_opset
from fuzzer.modelcheck.model import ModelKind, UserModel
from fuzzer.modelcheck.offline import sample_images_here
from fuzzer.modelcheck.runs import dtype_of, judge_all, run_onnx, tolerance_for
from fuzzer.support.errors import UsageError
from fuzzer.support.tensors import to_oracle_array, to_torch
from generators.dtypes import DType
from generators.ir import Graph, TensorType
from generators.onnx_native import NATIVE_OPSETS
from oracles.blame import blame_output
from oracles.signature import wrong_value_signature
from oracles.taxonomy import failure_verdict, upstream_verdict
from oracles.verdict import Stage, Symptom, Verdict, symptom_of

# The exporter whose model the ONNX tools start from, for a PyTorch model.
TOOL_UPSTREAM = "torch-onnx-dynamo"


@dataclass(frozen=True)
class Conversion:
    """One converter on the model: its verdict, the ONNX model it started from (for an ONNX tool) and the one it
    wrote, where they exist."""

    converter: str
    role: Role
    verdict: Verdict
    timings: Mapping[str, float] = field(default_factory=dict)
    source_onnx: bytes | None = None
    target_onnx: bytes | None = None


# Which converters take each kind of model: (their roles, their source frameworks). An ONNX tool or importer takes a
# PyTorch or Keras model through an exporter's model (the torch exporter its options name, tf2onnx's).
APPLICABLE: Mapping[ModelKind, tuple[tuple[Role, ...], frozenset[str]]] = {
    ModelKind.ONNX: ((Role.ONNX_TOOL, Role.IMPORTER), frozenset({"onnx"})),
    ModelKind.TORCH: ((Role.EXPORTER, Role.ONNX_TOOL, Role.IMPORTER), frozenset({"pytorch", "onnx"})),
    ModelKind.KERAS: ((Role.EXPORTER, Role.ONNX_TOOL, Role.IMPORTER), frozenset({"tensorflow", "onnx"})),
}


def applicable(model: UserModel, registry: ConverterRegistry, wanted: Sequence[str] = ()) -> tuple[Converter, ...]:
    """The converters that take this kind of model and can run here (or those `wanted`, each checked to apply)."""
    roles, frameworks = APPLICABLE[model.kind]
    fits = [c for c in registry.values() if c.role in roles and c.framework in frameworks]
    if not wanted:
        return tuple(c for c in fits if c.availability()[0])
    unfit = [name for name in wanted if registry[name] not in fits]
    if unfit:
        what = {ModelKind.ONNX: "an ONNX", ModelKind.TORCH: "a PyTorch", ModelKind.KERAS: "a Keras"}[model.kind]
        raise UsageError(f"{', '.join(unfit)}: does not take {what} model (those that do: "
                         f"{', '.join(c.name for c in fits)})")
    return tuple(registry[name] for name in wanted)


@dataclass(frozen=True)
class TorchPrepared:
    """A PyTorch model made ready once for every converter: the Source (which also holds the upstream export the
    ONNX tools share), the float32 outputs and the float64 ones."""

    source: Source
    eager: tuple
    reference: tuple | None



@dataclass(frozen=True)
class OnnxPrepared:
    """An ONNX model as the ONNX tools and importers start from it: a Source whose upstream export (at `options`'
    upstream and opset) is the user's model and its run with optimizations off, as the native model is given."""

    source: Source
    data: bytes
    outputs: tuple[np.ndarray, ...]
    options: Mapping[str, object]


def onnx_source(model: UserModel) -> OnnxPrepared:
    """The user's model as every ONNX tool's upstream: its signature as the Source's graph, its run as the baseline."""
    assert model.onnx_model is not None
    data = model.onnx_model.SerializeToString()
    try:
        outputs = run_onnx(data, model.feeds())
    except Exception as exc:  # the user's own model does not run: nothing to compare a conversion with
        raise UsageError(f"{model.label}: ONNX Runtime cannot run the model itself ({str(exc).splitlines()[0][:200]})"
                         ) from None
    types = {s.name: TensorType(s.shape, DType(s.dtype)) for s in model.slots}
    names = tuple(o.name for o in model.onnx_model.graph.output)
    types.update({n: TensorType(tuple(o.shape), DType(dtype_of(o))) for n, o in zip(names, outputs)})
    graph = Graph({s.name: types[s.name] for s in model.slots}, {}, (), names, types)
    source = Source(graph, torch.nn.Identity(), tuple(to_torch(x) for x in model.inputs))
    opset = next((o.version for o in model.onnx_model.opset_import if o.domain in ("", "ai.onnx")), NATIVE_OPSETS[1])
    opset = min(max(opset, NATIVE_OPSETS[0]), NATIVE_OPSETS[1])
    source.exports[(NATIVE, opset)] = SharedExport(data, outputs, tuple(dtype_of(o) for o in outputs))
    return OnnxPrepared(source, data, outputs, {"upstream": NATIVE, "opset": opset})


def convert_onnx(prepared: OnnxPrepared, converter: Converter) -> Conversion:
    """An ONNX tool (or importer) on the user's model, given as its upstream, judged against the model's own run."""
    # onnx2tf would download sample images for a model whose inputs look like NHWC images: it finds them here.
    where = sample_images_here() if isinstance(converter, Onnx2Tf) else contextlib.nullcontext()
    try:
        with where:
            run = converter.convert(prepared.source, prepared.options)
    except StageError as exc:
        verdict = failure_verdict(converter.name, exc.failure, converter.unsupported_messages)
        return Conversion(converter.name, converter.role, verdict, dict(exc.timings), prepared.data, exc.model)
    except UpstreamError as exc:
        verdict = upstream_verdict(converter.name, exc.upstream, exc.failure, exc.labels, exc.symptom)
        return Conversion(converter.name, converter.role, verdict, dict(exc.timings))
    expected = run.baseline if run.baseline is not None else prepared.outputs
    verdict = verdict_of(converter, run.outputs, expected, None)
    return Conversion(converter.name, converter.role, verdict, dict(run.timings), prepared.data,
                      session_model(converter, prepared, run))


def session_model(converter: Converter, prepared: OnnxPrepared, run: TargetRun) -> bytes | None:
    """The model the target ran: ONNX Runtime's optimizer changes it in the session, so its converted model is the
    one the session optimized at the run's level (what it wrote to optimized_model_filepath)."""
    if not isinstance(converter, RuntimeOptimizer) or run.model != prepared.data:
        return run.model
    options = converter.options(prepared.options)
    return optimized_model(run.model, getattr(options, converter.level_option))


class TupleOutputs(torch.nn.Module):
    """The user's module with its outputs always a tuple, as the exporters' sources are."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.inner(*inputs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def torch_source(model: UserModel) -> TorchPrepared:
    """The converters' Source (a graph of the signature alone), the float32 outputs and the float64 ones."""
    assert model.module is not None
    module = TupleOutputs(model.module).eval()
    inputs = tuple(to_torch(x) for x in model.inputs)
    with torch.no_grad():
        eager = tuple(to_oracle_array(o)[0] for o in module(*inputs))
    types = {s.name: TensorType(s.shape, DType(s.dtype)) for s in model.slots}
    names = tuple(f"output_{i}" for i in range(len(eager)))
    types.update({n: TensorType(tuple(o.shape), DType(str(o.dtype))) for n, o in zip(names, eager)})
    graph = Graph({s.name: types[s.name] for s in model.slots}, {}, (), names, types)
    return TorchPrepared(Source(graph, module, inputs), eager, float64_outputs(module, inputs))


def convert_torch(prepared: TorchPrepared, converter: Converter) -> Conversion:
    """An exporter (or an ONNX tool from TOOL_UPSTREAM's model) on the module, judged against eager PyTorch (the
    tool against the model it started from)."""
    source, eager, reference = prepared.source, prepared.eager, prepared.reference
    opset = upstream_default_opset(TOOL_UPSTREAM)
    tool = converter.role is Role.ONNX_TOOL
    try:
        run = converter.convert(source, {"upstream": TOOL_UPSTREAM, "opset": opset} if tool else None)
    except StageError as exc:  # a tool's failure keeps the model it started from, for the repair
        verdict = failure_verdict(converter.name, exc.failure, converter.unsupported_messages)
        upstream = cached_upstream(source, TOOL_UPSTREAM, opset) if tool else None
        return Conversion(converter.name, converter.role, verdict, dict(exc.timings), upstream, exc.model)
    except UpstreamError as exc:
        verdict = upstream_verdict(converter.name, exc.upstream, exc.failure, exc.labels, exc.symptom)
        return Conversion(converter.name, converter.role, verdict, dict(exc.timings))
    expected = eager if run.baseline is None else run.baseline
    verdict = verdict_of(converter, run.outputs, expected, reference if run.baseline is None else None)
    return Conversion(converter.name, converter.role, verdict, dict(run.timings), run.baseline_model, run.model)


def verdict_of(converter: Converter, actual: Sequence, expected: Sequence, reference: Sequence | None) -> Verdict:
    """Pass, or the symptom of the first failing output; a divergence the float64 run blames on the float32 source
    passes, labelled."""
    if len(actual) != len(expected):
        message = f"{len(actual)} outputs where the source has {len(expected)}"
        return Verdict(Symptom.WRONG_SHAPE, converter.divergence_stage, converter.name, (), "", message)
    metrics = judge_all(actual, expected)
    symptom = symptom_of(metrics)
    if symptom is Symptom.PASS:
        return Verdict(Symptom.PASS, Stage.NONE, converter.name, metrics)
    failing = [i for i, m in enumerate(metrics) if not m.ok]
    if symptom is Symptom.WRONG_VALUES and reference is not None:
        blames = [blame_output(expected[i], actual[i], reference[i], metrics[i].dtype, tolerance_for(metrics[i].dtype))
                  for i in failing]
        if not any(b.blamed for b in blames):
            return Verdict(Symptom.PASS, Stage.NONE, converter.name, metrics, labels=(blames[0].reason,))
    first = metrics[failing[0]]
    message = f"output {failing[0]}: {first.reason.value}, max_abs={first.max_abs:.3g}"
    signature = wrong_value_signature(converter.name, converter.divergence_stage, symptom, f"output{failing[0]}",
                                      first.dtype)
    return Verdict(symptom, converter.divergence_stage, converter.name, metrics, signature, message, ("user-model",))
