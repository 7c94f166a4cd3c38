"""A Keras zoo model through tf2onnx (`from_keras`, as tf2onnx's converter calls it), run in ONNX Runtime and judged
against Keras itself on the same inputs."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from fuzzer.check.zoo_source import ZooSource, dynamic_axes, signature_graph
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.tf2onnx_exporter import Tf2OnnxOptions, export, import_quietly
from fuzzer.support.tensors import to_torch
from generators.zoo import ZooModel
from oracles.verdict import Stage


def prepare_keras(zoo: ZooModel) -> ZooSource:
    """Keras's outputs on the entry's inputs (inference mode), and the signature Source the exporter reads."""
    tf = import_quietly("tensorflow")
    start = time.perf_counter()
    result = zoo.model([tf.constant(x) for x in zoo.inputs] if len(zoo.inputs) > 1 else tf.constant(zoo.inputs[0]),
                       training=False)
    eager = tuple(np.asarray(o) for o in (result if isinstance(result, (list, tuple)) else [result]))
    dtypes = tuple(str(o.dtype) for o in eager)
    graph = signature_graph(zoo, eager, dtypes)
    source = Source(graph, None, tuple(to_torch(x) for x in zoo.inputs), dynamic=dynamic_axes(zoo))  # type: ignore[arg-type]
    return ZooSource(zoo, source, eager, dtypes, None, {"source": time.perf_counter() - start})


def convert_keras(prepared: ZooSource, options: ConverterOptions) -> TargetRun:
    """tf2onnx's from_keras at the options' opset (its optimizer as they say), the model checked and run."""
    opts: Tf2OnnxOptions = options  # type: ignore[assignment]
    keras = dataclasses.replace(opts, source="keras")
    steps = Steps()
    with steps.at(Stage.NODE_CONVERSION, "export"):
        proto = export(prepared.zoo.model, prepared.source.graph, keras)
    data = check_and_serialize(proto, steps)
    outputs, dtypes = run_model(data, prepared.source, steps)
    return TargetRun(outputs, dtypes, dict(steps.timings), model=data)
