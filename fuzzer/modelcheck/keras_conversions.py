"""A Keras model through the converters that take it: tf2onnx's `from_keras` (through the registered converter's
own export, so a planted tf2onnx is the one that runs), judged against Keras itself; and the ONNX tools and importers
(onnx2tf among them), each given tf2onnx's model as its upstream, judged against that model's own run, as for a
user's ONNX file."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import onnx

from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, StageError, Steps
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.tf2onnx_exporter import Tf2Onnx, Tf2OnnxOptions, export, quiet_tensorflow
from fuzzer.modelcheck.conversions import Conversion, OnnxPrepared, convert_onnx, onnx_source, verdict_of
from fuzzer.modelcheck.keras_model import keras_outputs
from fuzzer.modelcheck.model import ModelKind, UserModel
from fuzzer.modelcheck.runs import dtype_of
from fuzzer.support.tensors import to_torch
from generators.dtypes import DType
from generators.ir import Graph, TensorType
from oracles.taxonomy import failure_verdict
from oracles.verdict import Stage, Symptom, Verdict

# tf2onnx's options for a user's Keras model: from_keras at its preferred opset, its optimizer on (its defaults).
KERAS_EXPORT = Tf2OnnxOptions(source="keras")


@dataclass(frozen=True)
class KerasPrepared:
    """A Keras model made ready once for every converter: the signature Source tf2onnx reads, Keras's outputs, and
    tf2onnx's model as the ONNX tools' upstream (None, with the reason, where tf2onnx cannot export or run it)."""

    model: UserModel
    source: Source
    eager: tuple[np.ndarray, ...]
    upstream: OnnxPrepared | None
    why_no_upstream: str = ""


def keras_source(model: UserModel) -> KerasPrepared:
    """Keras's outputs on the inputs, the signature graph, and tf2onnx's model run once for the ONNX tools."""
    quiet_tensorflow()
    eager = keras_outputs(model.keras, model.inputs)
    types = {s.name: TensorType(s.shape, DType(s.dtype)) for s in model.slots}
    names = tuple(f"output_{i}" for i in range(len(eager)))
    types.update({n: TensorType(tuple(o.shape), DType(dtype_of(o))) for n, o in zip(names, eager)})
    graph = Graph({s.name: types[s.name] for s in model.slots}, {}, (), names, types)
    source = Source(graph, None, tuple(to_torch(x) for x in model.inputs))  # type: ignore[arg-type]
    try:
        proto = export(model.keras, graph, KERAS_EXPORT)
        upstream = onnx_source(dataclasses.replace(model, kind=ModelKind.ONNX, onnx_model=proto))
    except Exception as exc:  # tf2onnx's own failure (or a model ONNX Runtime cannot run) shows in its verdict
        return KerasPrepared(model, source, eager, None, f"tf2onnx's model of it: {str(exc).splitlines()[0][:200]}")
    return KerasPrepared(model, source, eager, upstream)


def convert_keras(prepared: KerasPrepared, converter: Converter) -> Conversion:
    """tf2onnx judged against Keras; an ONNX tool or importer judged against tf2onnx's model it started from."""
    if isinstance(converter, Tf2Onnx):
        return convert_tf2onnx(prepared, converter)
    if prepared.upstream is None:
        # The source stage: the tool's input failed, not the tool (Verdict.is_bug is false there).
        message = f"not run: no upstream model ({prepared.why_no_upstream})"
        verdict = Verdict(Symptom.CRASH, Stage.SOURCE, converter.name, (), "", message, ("upstream:tf2onnx",))
        return Conversion(converter.name, converter.role, verdict)
    return convert_onnx(prepared.upstream, converter)


def convert_tf2onnx(prepared: KerasPrepared, converter: Tf2Onnx) -> Conversion:
    """The registered tf2onnx's export of the Keras model, checked, run in ONNX Runtime and judged against Keras."""
    steps = Steps()
    try:
        with steps.at(Stage.NODE_CONVERSION, "export"):
            proto: onnx.ModelProto = converter.export_model(prepared.model.keras, prepared.source.graph, KERAS_EXPORT)
        data = check_and_serialize(proto, steps)
        outputs, _ = run_model(data, prepared.source, steps)
    except StageError as exc:
        verdict = failure_verdict(converter.name, exc.failure, converter.unsupported_messages)
        return Conversion(converter.name, converter.role, verdict, dict(exc.timings), None, exc.model)
    verdict = verdict_of(converter, outputs, prepared.eager, None)
    return Conversion(converter.name, converter.role, verdict, dict(steps.timings), None, data)
