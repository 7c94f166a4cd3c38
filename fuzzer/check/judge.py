"""Judging one conversion: run the converter, turn its outcome into a verdict (failure or the oracle's word).

Failures of the library under test become verdicts tagged with their stage; failures of the exporter an
ONNX-to-ONNX converter starts from are Stage.SOURCE (never this converter's bug); anything else raised is a
convsmith bug and keeps its traceback. Shapes and dtypes compare exactly; values only count as wrong when blame
says the target is measurably farther from the float64 reference than the float32 source is, and a float64 model
that an ONNX operator with no float64 makes compute in float32 is that operator's precision, not a defect (labelled
unsupported). A dynamic export is judged at the shape it was traced with and at a second one
(fuzzer/check/dynamic.py).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

from fuzzer.check.dynamic import planned
from fuzzer.check.result import INVALID_INPUTS, CheckResult, Expected, add_timings, timer
from fuzzer.check.source import float32_attr_reference, graph_values
from fuzzer.converters.base import Converter, ConverterOptions, StageError, Steps, TargetRun, UpstreamError
from fuzzer.converters.runtime import run_model, run_onnx_target
from fuzzer.converters.schema import float32_only_ops, schema_note
from oracles.blame import BlameResult, blame_output
from oracles.compare import FLOAT_DTYPES, OutputComparison, Reason, compare, default_tolerance
from oracles.dynamic import TRACED_ONLY, dynamic_only
from oracles.signature import wrong_value_signature
from oracles.taxonomy import failure_verdict, upstream_verdict
from oracles.verdict import Stage, Symptom, Verdict, symptom_of

# The label of a float64 model an ONNX operator without float64 makes compute in float32: shown, not filed.
FLOAT64_THROUGH_FLOAT32 = "float64-through-float32"


def judge(expected: Expected, converter: Converter, options: ConverterOptions,
          timings: dict[str, float]) -> CheckResult:
    """Run the converter once and turn its outcome into a verdict (no rerun, no locating); an exporter's dynamic
    export is judged at its traced and its second shape."""
    if getattr(options, "dynamic", False):
        return _judge_dynamic(planned(expected, timings), converter, options, timings)
    return _judge_run(expected, converter, lambda: converter.convert(expected.source, options), timings)


def _judge_dynamic(expected: Expected, converter: Converter, options: ConverterOptions,
                   timings: dict[str, float]) -> CheckResult:
    """The dynamic export judged at the traced shape; when that passes, its model at the second shape. A failure the
    static export does not share, or one only the second shape shows, is the dynamic export's own (oracles/dynamic)."""
    result = _judge_run(expected, converter, lambda: converter.convert(expected.source, options), timings)
    if result.verdict.is_bug:
        static: dict[str, float] = {}
        plain = _judge_run(expected, converter, lambda: converter.convert(
            expected.source, dataclasses.replace(options, dynamic=False)), static)
        add_timings(timings, static, "static.")
        return result if plain.verdict.is_bug else dataclasses.replace(
            result, verdict=dynamic_only(result.verdict, at_second_shape=False))
    model = result.target.model if result.target is not None else None
    if result.verdict.symptom is not Symptom.PASS or expected.second is None or model is None:
        labels = (TRACED_ONLY,) if result.verdict.symptom is Symptom.PASS else ()
        return dataclasses.replace(result, verdict=result.verdict.with_labels(*labels))
    second = _judge_second_shape(expected.second, model, converter, timings)
    if second.verdict.symptom is Symptom.PASS:
        verdict = result.verdict.with_labels(*second.verdict.labels)
        return dataclasses.replace(result, verdict=verdict, second=second.target)
    return dataclasses.replace(result, verdict=dynamic_only(second.verdict, at_second_shape=True),
                               failure=second.failure, second=second.target)


def _judge_second_shape(second: Expected, model: bytes, converter: Converter,
                        timings: dict[str, float]) -> CheckResult:
    """The exported model run at the second shape (at the converter's ONNX Runtime level) and judged against the
    source there; its steps are timed "second.<step>"."""
    steps, level = Steps(), converter.target_level
    load_stage = Stage.RUNTIME_LOAD if level == "disabled" else Stage.GRAPH_OPTIMIZATION  # optimizers run at load
    try:
        outputs, dtypes = run_model(model, second.source, steps, level, load_stage=load_stage)
    except StageError as exc:
        add_timings(timings, steps.timings, "second.")
        return CheckResult(failure_verdict(converter.name, exc.failure), {}, second, failure=exc.failure)
    add_timings(timings, steps.timings, "second.")
    run = TargetRun(outputs, dtypes, dict(steps.timings), model=model)
    with timer(timings, "second.oracle"):
        verdict = oracle(second, run, converter)
    return CheckResult(verdict, {}, second, target=run)


def judge_model(model: onnx.ModelProto | bytes, expected: Expected, converter: Converter) -> CheckResult:
    """Judge a given ONNX model as if `converter` had produced it (fault injection, saved models)."""
    return _judge_run(expected, converter, lambda: run_onnx_target(model, expected.source, Steps()), {})


def _judge_run(expected: Expected, converter: Converter, produce: Callable[[], TargetRun],
               timings: dict[str, float]) -> CheckResult:
    try:
        run = produce()
    except StageError as exc:
        verdict = failure_verdict(converter.name, exc.failure)
        if verdict.stage is Stage.VALIDATION:  # a schema type error says from which opset the type is allowed
            verdict = dataclasses.replace(verdict, message=verdict.message + schema_note(verdict.message))
        return CheckResult(verdict, timings, expected, failure=exc.failure, failed_model=exc.model)
    except UpstreamError as exc:
        verdict = upstream_verdict(converter.name, exc.upstream, exc.failure, exc.labels, exc.symptom)
        return CheckResult(verdict, timings, expected, failure=exc.failure)
    timings.update(run.timings)
    with timer(timings, "oracle"):
        verdict = oracle(expected, run, converter)
    return CheckResult(verdict, timings, expected, target=run)


def oracle(expected: Expected, run: TargetRun, converter: Converter) -> Verdict:
    """Shape and dtype exactly; values only when blame says the target is measurably farther from float64."""
    name, dtypes = converter.name, expected.source.output_dtypes
    baseline = run.baseline if run.baseline is not None else expected.eager
    # What torch leaves unspecified is not compared; the twin's values settle the reference, the source's the rest.
    source_values, reference_values = _settling_values(expected, False), _settling_values(expected, True)
    if len(run.outputs) != len(dtypes):
        return _divergence(expected, converter, Symptom.WRONG_SHAPE, (), None,
                           f"target has {len(run.outputs)} outputs, the graph {len(dtypes)}")
    # An output bit for bit the source's (most are) compares equal settled or not: settling it is skipped.
    same = tuple(_bit_identical(a, b) for a, b in zip(run.outputs, baseline, strict=True))
    run = dataclasses.replace(run, outputs=settled(expected, run.outputs, source_values, same))
    baseline = settled(expected, baseline, source_values, same)
    if run.baseline is not None and not _matches_graph(baseline, run.baseline_dtypes, expected.eager, dtypes):
        return Verdict(Symptom.WRONG_SHAPE, Stage.SOURCE, name, message="the unconverted model's outputs do not "
                       "have the graph's shapes and dtypes: the exporter's bug, not this converter's")
    rows = zip(run.outputs, run.output_dtypes, baseline, dtypes, strict=True)
    metrics = tuple(_compare(a, d, b, t) for a, d, b, t in rows)
    symptom = symptom_of(metrics)
    if symptom is Symptom.PASS:
        return _labelled(Verdict(Symptom.PASS, Stage.NONE, name, metrics), expected)
    expected = dataclasses.replace(expected, reference=settled(expected, expected.reference, reference_values))
    failing = [i for i, m in enumerate(metrics) if not m.ok]
    if symptom is not Symptom.WRONG_VALUES:
        return _divergence(expected, converter, symptom, metrics, failing[0], f"{symptom.json_name} at output "
                           f"{expected.source.graph.outputs[failing[0]]}")
    rounded = _rounded_reference(expected, failing, reference_values)
    blames = {i: blame_output(baseline[i], run.outputs[i], expected.reference[i], dtypes[i], rounded=rounded[i])
              for i in failing}
    blamed = [i for i in failing if blames[i].blamed]
    if not blamed:
        reasons = sorted({f"not-blamed:{b.reason}" for b in blames.values()})
        return _labelled(Verdict(Symptom.PASS, Stage.NONE, name, metrics, labels=tuple(reasons)), expected)
    by_design = _float32_by_design(expected, run, blamed, dtypes)
    if by_design:
        return _labelled(Verdict(Symptom.UNSUPPORTED, converter.divergence_stage, name, metrics,
                                 message=f"ONNX's {', '.join(by_design)} takes no float64: the model computes it "
                                 "in float32, as the operator's definition allows no other way",
                                 labels=tuple(f"{FLOAT64_THROUGH_FLOAT32}:{op}" for op in by_design)), expected)
    return _divergence(expected, converter, Symptom.WRONG_VALUES, metrics, blamed[0],
                       _blame_message(expected, blamed[0], blames[blamed[0]]))


def _float32_by_design(expected: Expected, run: TargetRun, blamed: Sequence[int], dtypes: Sequence[str]
                       ) -> tuple[str, ...]:
    """The float32-only ONNX operators a float64 model goes through, when its blamed float64 outputs are within
    float32's tolerance of the float64 answer (so float32 arithmetic explains the whole error); else ()."""
    if run.model is None or any(dtypes[i] != "float64" for i in blamed):
        return ()
    through = float32_only_ops(run.model)
    float32 = default_tolerance("float32")
    within = all(compare(np.asarray(run.outputs[i]), np.asarray(expected.reference[i]), "float64", float32).ok
                 for i in blamed)
    return through if within else ()


def _settling_values(expected: Expected, float64: bool) -> Callable[[], Mapping[str, np.ndarray]]:
    """The values `settled` reads: those the source's runs kept, else the graph run again (once) when asked."""
    kept = expected.settling64 if float64 else expected.settling
    if kept is not None:
        return lambda: kept
    return functools.cache(functools.partial(graph_values, expected.source, float64))


def settled(expected: Expected, outputs: Sequence[np.ndarray], values: Callable[[], Mapping[str, np.ndarray]],
            kept: Sequence[bool] = ()) -> tuple[np.ndarray, ...]:
    """The graph's outputs with what torch leaves unspecified settled by the operator that made each one (the
    order of topk(sorted=False), which of tied elements an index names), from the op's input values (`values`,
    called only when such an op made an output); an output whose shape is not the graph's, or marked in `kept`, is
    left as it is."""
    graph, ops = expected.source.graph, expected.source.module.ops
    made_by = {o: (i, pos) for i, node in enumerate(graph.nodes) for pos, o in enumerate(node.outputs)}
    result = []
    for k, (name, value) in enumerate(zip(graph.outputs, outputs, strict=True)):
        where = made_by.get(name)
        if where is None or (k < len(kept) and kept[k]) or tuple(np.shape(value)) != graph.types[name].shape:
            result.append(value)
            continue
        node, op = graph.nodes[where[0]], ops[where[0]]
        inputs = [values()[n] for n in node.inputs] if op.settles_output else []
        result.append(op.canonical_output(node.attrs, where[1], value, inputs))
    return tuple(result)


def _rounded_reference(expected: Expected, failing: Sequence[int],
                       values: Callable[[], Mapping[str, np.ndarray]]) -> tuple[np.ndarray | None, ...]:
    """Per output, the float64 reference computed with the attributes formats store as float32 rounded so, for
    the failing float outputs of a graph that has such attributes (None elsewhere)."""
    dtypes = expected.source.output_dtypes
    floats = [i for i in failing if dtypes[i] in FLOAT_DTYPES]
    rounded = float32_attr_reference(expected.source) if floats else None
    if rounded is None:
        return (None,) * len(dtypes)
    rounded = settled(expected, rounded, values)
    return tuple(rounded[i] if i in floats else None for i in range(len(dtypes)))


def _bit_identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and values (NaN where NaN): settled alike, so equal settled or not."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _compare(actual: np.ndarray, declared: str, expected: np.ndarray, dtype: str) -> OutputComparison:
    """compare(), plus the dtype the target declared: bfloat16 and float32 share storage, so check the name."""
    result = compare(actual, expected, dtype)
    if declared != dtype and result.reason is not Reason.SHAPE:
        return dataclasses.replace(result, ok=False, reason=Reason.DTYPE, actual_dtype=declared, expected_dtype=dtype)
    if result.reason is Reason.DTYPE:  # the graph's dtype, not the storage it is compared in (bfloat16 in float32)
        return dataclasses.replace(result, expected_dtype=dtype)
    return result


def _matches_graph(baseline: Sequence[np.ndarray], declared: Sequence[str] | None, eager: Sequence[np.ndarray],
                   dtypes: Sequence[str]) -> bool:
    """Whether the unconverted model's outputs have the graph's shapes and dtypes; its declared dtypes too, since
    bfloat16 and float32 share numpy storage."""
    if declared is not None and tuple(declared) != tuple(dtypes):
        return False
    return len(baseline) == len(eager) and all(b.shape == e.shape and b.dtype == e.dtype
                                               for b, e in zip(baseline, eager, strict=True))


def _divergence(expected: Expected, converter: Converter, symptom: Symptom, metrics: tuple[OutputComparison, ...],
                index: int | None, message: str) -> Verdict:
    """A divergence verdict; its signature names the operator and dtype producing the diverging output."""
    graph, stage = expected.source.graph, converter.divergence_stage
    op = dtype = None
    if index is not None:
        out = graph.outputs[index]
        op, dtype = graph.producer()[out].op, graph.types[out].dtype.value
    signature = wrong_value_signature(converter.name, stage, symptom, op, dtype)
    verdict = Verdict(symptom, stage, converter.name, metrics, signature, message, diverging_op=op,
                      diverging_dtype=dtype)
    return _labelled(verdict, expected)


def _blame_message(expected: Expected, index: int, blame: BlameResult) -> str:
    out = expected.source.graph.outputs[index]
    return (f"output {out}: target {blame.target_error:.3g} tolerance units from the float64 reference, "
            f"source {blame.source_error:.3g}")


def _labelled(verdict: Verdict, expected: Expected) -> Verdict:
    return verdict if expected.valid_inputs else verdict.with_labels(INVALID_INPUTS)
