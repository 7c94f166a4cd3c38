"""The "onnx-native" upstream: the graph materialized straight to ONNX, with the source's settled weights, and a
second opinion on its baseline run.

An exporter's model is vouched for by eager PyTorch (the exporter cross-check); a native model has no exporter, so
ONNX's reference evaluator runs it too: where it and ONNX Runtime (optimizations off) disagree, and PyTorch does not
side with ONNX Runtime, the baseline the ONNX tools are judged against cannot be trusted: the test stops at the
source, never filed as the tool's bug.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import torch

from fuzzer.converters.conversion import Source, Steps, UpstreamError
from fuzzer.support.tensors import to_oracle_array
from generators.ir import Graph
from generators.onnx_native import missing_counterparts, to_onnx_model
from oracles.compare import DEFAULT_TOLERANCES, FLOAT_DTYPES, Tolerance, compare
from oracles.taxonomy import Failure
from oracles.verdict import Stage, Symptom

NATIVE = "onnx-native"
DISPUTED = "baseline-disputed"  # the label of a test whose native baseline two runtimes disagree on
# The reference evaluator runs numpy node by node (Conv and pooling as Python loops): a graph holding more elements
# than this in all its tensors gets no second opinion, which would cost more than the test. Reduced graphs and the
# usual fuzzing sizes are well below it.
SECOND_OPINION_MAX_ELEMENTS = 50_000


class NoCounterpart(Exception):
    """A node of the graph has no ONNX counterpart at the requested opset (the message says which)."""


def native_model(source: Source, opset: int, steps: Steps) -> onnx.ModelProto:
    """The source's graph as an ONNX model at `opset`, its weights the module's (as the input search settled them);
    a node without a counterpart fails as "not supported" at node conversion (an unsupported upstream)."""
    graph = source.graph
    weights = {name: to_oracle_array(getattr(source.module, name))[0] for name in graph.weights}
    with steps.at(Stage.NODE_CONVERSION, "export"):
        model = to_onnx_model(graph, weights, opset)
        if model is None:
            missing = ", ".join(missing_counterparts(graph, opset))
            raise NoCounterpart(f"native ONNX at opset {opset} is not supported for {missing}")
    return model


def second_opinion(model: onnx.ModelProto, source: Source, outputs: Sequence[np.ndarray], steps: Steps) -> None:
    """Run the native model in onnx.reference and compare with ONNX Runtime's baseline `outputs`; UpstreamError
    labelled DISPUTED where they disagree and eager PyTorch does not side with ONNX Runtime either (the reference
    evaluator has gaps of its own: ConvTranspose with groups and dilations). Each output is compared at the tolerance
    of the least precise float dtype it is computed through: a float64 output cast from float32 carries float32's
    error. Skipped for large graphs, and where the reference evaluator cannot run the model at all."""
    graph = source.graph
    if sum(t.numel for t in graph.types.values()) > SECOND_OPINION_MAX_ELEMENTS:
        return
    from onnx.reference import ReferenceEvaluator

    feeds = {name: to_oracle_array(x)[0] for name, x in zip(source.input_names, source.inputs, strict=True)}
    with steps.at(Stage.RUNTIME_EXECUTION, "second_opinion"):
        try:
            reference = ReferenceEvaluator(model).run(None, feeds)
        except Exception:  # the reference evaluator's own gap, not a verdict on the baseline
            return
    eager: list[np.ndarray] = []
    for i, (name, ours, theirs) in enumerate(zip(graph.outputs, outputs, reference, strict=True)):
        dtype, tolerance = graph.types[name].dtype.value, working_tolerance(graph, name)
        if compare(np.asarray(ours), np.asarray(theirs), dtype, tolerance).ok:
            continue
        if not eager:
            with torch.no_grad():
                eager = [to_oracle_array(x)[0] for x in source.module(*source.inputs)]
        if compare(np.asarray(ours), eager[i], dtype, tolerance).ok:
            continue  # ONNX Runtime agrees with PyTorch: the reference evaluator is the odd one out
        result = compare(np.asarray(ours), np.asarray(theirs), dtype, tolerance)
        message = (f"ONNX Runtime (optimizations off) disagrees with onnx.reference and with PyTorch on output {name} "
                   f"({result.reason.value}, max abs {result.max_abs:.3g}): the baseline is not trustworthy")
        failure = Failure(Stage.RUNTIME_EXECUTION, "BaselineDisputed", message, "")
        raise UpstreamError(failure, NATIVE, labels=(DISPUTED,), symptom=Symptom.WRONG_VALUES)


def working_tolerance(graph: Graph, name: str) -> Tolerance:
    """The loosest default tolerance among the float dtypes tensor `name` is computed through (itself, the nodes
    before it, their inputs and weights); its own dtype's when none is a float."""
    producer, seen, todo = graph.producer(), set(), [name]
    dtypes = {graph.types[name].dtype.value}
    while todo:
        tensor = todo.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        dtypes.add(graph.types[tensor].dtype.value)
        if tensor in producer:
            todo += producer[tensor].inputs
    floats = [DEFAULT_TOLERANCES[d] for d in dtypes if d in FLOAT_DTYPES]
    if not floats:
        return DEFAULT_TOLERANCES[graph.types[name].dtype.value]
    return Tolerance(max(t.rtol for t in floats), max(t.atol for t in floats))
