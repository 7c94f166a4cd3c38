"""A finding of an ONNX tool in a real model, reduced to a case folder: the smallest cut that still shows it
(fuzzer/modelcheck/cut.py) as the `upstream.onnx` the tool receives, the source's values at its boundary as the
inputs, the cut's own run with optimizations off as the expected outputs, and the usual repro.py that starts from
upstream.onnx and report.md. The case's graph is the cut's signature (its inputs and outputs, no nodes): its
operators are ONNX nodes, which convsmith's graph IR does not hold."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from fuzzer.cases.case import CaseData, case_id, collect_versions, now_iso
from fuzzer.cases.diagnosis import Blame
from fuzzer.cases.folder import write_case
from fuzzer.cases.fresh_replay import replay_and_record
from fuzzer.converters.base import Converter
from fuzzer.converters.native import NATIVE
from fuzzer.diagnosis.model_blame import WholeModel, model_blame
from fuzzer.modelcheck.cut import Cut, failing_cuts, tool_on, tool_options
from fuzzer.modelcheck.runs import dtype_of, run_onnx
from generators.dtypes import DType
from generators.ir import Graph, TensorType
from generators.onnx_native import NATIVE_OPSETS
from oracles.compare import compare_all
from oracles.verdict import Verdict

REDUCED_SUFFIX = "reduced"


def cut_graph(cut: Cut, outputs: tuple[np.ndarray, ...]) -> Graph:
    """The cut's signature as a graph: its inputs and outputs typed, no nodes."""
    inputs = {i.name: TensorType(tuple(x.shape), DType(dtype_of(x))) for i, x in zip(_data_inputs(cut.model),
                                                                                     cut.inputs, strict=True)}
    names = tuple(o.name for o in cut.model.graph.output)
    types = {**inputs, **{n: TensorType(tuple(y.shape), DType(dtype_of(y))) for n, y in zip(names, outputs)}}
    return Graph(inputs, {}, (), names, types)


def _data_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def cut_case(cut: Cut, converter: Converter, options: Mapping[str, Any], signature: str, label: str,
             seed: int) -> CaseData:
    """The case of a cut: the tool's verdict on it with the located operator, the cut as upstream.onnx."""
    upstream = cut.model.SerializeToString()
    expected = run_onnx(upstream, {i.name: x for i, x in zip(_data_inputs(cut.model), cut.inputs)})
    graph = cut_graph(cut, expected)
    verdict: Verdict = dataclasses.replace(cut.conversion.verdict, diverging_op=cut.start_op,
                                           diverging_dtype=cut.start_dtype)
    verdict = verdict.with_labels(label, "cut")
    blame = cut_blame(cut, converter, verdict, expected, label, options)
    log = (f"{label}: {converter.name} on the whole model, reduced to a cut of {cut.nodes} ONNX nodes grown from "
           f"node {cut.start} ({cut.start_op}); its inputs are the source's values there.\n{verdict.message}\n")
    return CaseData(id=f"{case_id(signature)}-{REDUCED_SUFFIX}", signature=signature, graph=graph, seed=seed,
                    converter=converter.name, converter_options=dict(options), verdict=verdict,
                    versions=collect_versions(converter.distributions), input_names=tuple(graph.inputs),
                    output_names=tuple(graph.outputs), created=now_iso(), inputs=cut.inputs, expected=expected,
                    model=cut.conversion.target_onnx, upstream_model=upstream, log=log, blame=blame,
                    reduction={"from": label, "cut_from_node": cut.start, "onnx_nodes": cut.nodes})


def cut_blame(cut: Cut, converter: Converter, verdict: Verdict, expected: tuple[np.ndarray, ...], label: str,
              options: Mapping[str, Any]) -> Blame:
    """Whose bug the cut shows (diagnosis/model_blame.py), judged as the tool's verdict on it was: against what the
    cut it received computes, at each output dtype's tolerance."""

    def judge(outputs: Sequence[np.ndarray], wanted: Sequence[np.ndarray]) -> tuple[int, str] | None:
        metrics = compare_all(outputs, wanted, [dtype_of(np.asarray(w)) for w in wanted])
        first = next((i for i, m in enumerate(metrics) if not m.ok), None)
        return None if first is None else (first, f"{metrics[first].reason.value}, "
                                                  f"max_abs={metrics[first].max_abs:.3g}")

    feeds = {i.name: x for i, x in zip(_data_inputs(cut.model), cut.inputs)}
    whole = WholeModel(f"on a cut of {cut.nodes} ONNX nodes ({label})", feeds, expected, judge, received=True,
                       named_ops=f"the cut ({label})")
    return model_blame(converter, verdict, cut.conversion.target_onnx, whole, options)


def reduce_tool_finding(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], converter: Converter,
                        options: Mapping[str, Any], signature: str, label: str, seed: int, out_dir: Path,
                        budget_s: float | None = None) -> Path | None:
    """Reduce an ONNX tool's failure on `model` (fed `feeds`) to a case folder in `out_dir`: the smallest cut whose
    repro.py, run alone, shows it (else the smallest that fails under the tool, its replay recorded as not showing
    it); None where the tool passes on the model as given here or no cut of at most MAX_CUT_NODES nodes fails.
    `budget_s`: no larger cut is tried once it is spent (the smallest failing one is kept)."""
    start = time.monotonic()
    inputs = tuple(feeds[i.name] for i in _data_inputs(model))
    whole = tool_on(model, inputs, converter, label, options)
    if not whole.verdict.is_bug:
        return None
    first: CaseData | None = None
    for cut in failing_cuts(model, feeds, converter, whole, options):
        used = converter.options(tool_options(options, {"upstream": NATIVE, "opset": _opset(cut.model)})).to_json()
        case = cut_case(cut, converter, used, signature, label, seed)
        first = first or case
        folder = write_case(out_dir, case, replace=True, converter=converter)
        if replay_and_record(folder).reproduces:  # its repro.py, run alone, shows it (its own tolerances)
            return folder
        if budget_s is not None and time.monotonic() - start > budget_s:
            break
    if first is None:
        return None
    folder = write_case(out_dir, first, replace=True, converter=converter)  # the smallest, marked not reproduced
    replay_and_record(folder)
    return folder


def _opset(model: onnx.ModelProto) -> int:
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), NATIVE_OPSETS[1])
    return min(max(opset, NATIVE_OPSETS[0]), NATIVE_OPSETS[1])
