"""Judging one conversion: run the converter, turn its outcome into a verdict (failure or the oracle's word).

Failures of the library under test become verdicts tagged with their stage; failures of the exporter an
ONNX-to-ONNX converter starts from are Stage.SOURCE (never this converter's bug); anything else raised is a
convsmith bug and keeps its traceback. A run that completes is judged by the oracle (oracles/judgement.py, through
fuzzer/check/oracle.py). A dynamic export is judged at the shape it was traced with and at the second one its
preparation planned (fuzzer/check/dynamic.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import onnx

from fuzzer.check.oracle import oracle
from fuzzer.check.result import CheckResult, Expected, add_timings, timer
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import StageError, Steps, TargetRun, UpstreamError
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.runtime import run_model, run_onnx_target
from fuzzer.converters.schema import schema_note
from oracles.dynamic import at_traced_shape, with_second_shape
from oracles.taxonomy import failure_verdict, upstream_verdict
from oracles.verdict import Stage, Symptom


def judge(expected: Expected, converter: Converter, options: ConverterOptions,
          timings: dict[str, float]) -> CheckResult:
    """Run the converter once and turn its outcome into a verdict (no rerun, no locating); an exporter's dynamic
    export is judged at its traced shape and the second one `expected` was planned with (dynamic.planned)."""
    if not getattr(options, "dynamic", False):
        return _judge_run(expected, converter, lambda: converter.convert(expected.source, options), timings)
    if expected.source.dynamic is None:
        raise ValueError("a dynamic export is judged on a planned source (fuzzer.check.dynamic.planned)")
    return _judge_dynamic(expected, converter, options, timings)


def _judge_dynamic(expected: Expected, converter: Converter, options: ConverterOptions,
                   timings: dict[str, float]) -> CheckResult:
    """The dynamic export judged at the traced shape; a bug there, against the static export's verdict; a pass,
    with its model run at the second shape (oracles/dynamic.py decides whose bug each is)."""
    result = _judge_run(expected, converter, lambda: converter.convert(expected.source, options), timings)
    if result.verdict.is_bug:
        static: dict[str, float] = {}
        plain = _judge_run(expected, converter, lambda: converter.convert(
            expected.source, dataclasses.replace(options, dynamic=False)), static)
        add_timings(timings, static, "static.")
        return dataclasses.replace(result, verdict=at_traced_shape(result.verdict, plain.verdict))
    model = result.target.model if result.target is not None else None
    if result.verdict.symptom is not Symptom.PASS or expected.second is None or model is None:
        return dataclasses.replace(result, verdict=with_second_shape(result.verdict, None))
    second = _judge_second_shape(expected.second, model, converter, timings)
    verdict = with_second_shape(result.verdict, second.verdict)
    if second.verdict.symptom is Symptom.PASS:
        return dataclasses.replace(result, verdict=verdict, second=second.target)
    return dataclasses.replace(result, verdict=verdict, failure=second.failure, second=second.target)


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
        return CheckResult(failure_verdict(converter.name, exc.failure, converter.unsupported_messages), {}, second,
                           failure=exc.failure)
    add_timings(timings, steps.timings, "second.")
    run = TargetRun(outputs, dtypes, dict(steps.timings), model=model)
    with timer(timings, "second.oracle"):
        verdict = oracle(second, run, converter)
    return CheckResult(verdict, {}, second, target=run)


def judge_model(model: onnx.ModelProto | bytes, expected: Expected, converter: Converter) -> CheckResult:
    """Judge a given ONNX model as if `converter` had produced it (fault injection, saved models)."""
    return _judge_run(expected, converter, lambda: run_onnx_target(model, expected.source, Steps(),
                                                                           converter.onnx_checked), {})


def _judge_run(expected: Expected, converter: Converter, produce: Callable[[], TargetRun],
               timings: dict[str, float]) -> CheckResult:
    try:
        run = produce()
    except StageError as exc:
        timings.update(exc.timings)
        verdict = failure_verdict(converter.name, exc.failure, converter.unsupported_messages)
        if verdict.stage is Stage.VALIDATION:  # a schema type error says from which opset the type is allowed
            verdict = dataclasses.replace(verdict, message=verdict.message + schema_note(verdict.message))
        return CheckResult(verdict, timings, expected, failure=exc.failure, failed_model=exc.model)
    except UpstreamError as exc:
        timings.update(exc.timings)
        verdict = upstream_verdict(converter.name, exc.upstream, exc.failure, exc.labels, exc.symptom)
        return CheckResult(verdict, timings, expected, failure=exc.failure)
    timings.update(run.timings)
    with timer(timings, "oracle"):
        verdict = oracle(expected, run, converter)
    return CheckResult(verdict, timings, expected, target=run)
