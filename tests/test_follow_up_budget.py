"""The follow-ups of a divergence (locate, rerun) stop converting once their budget is spent, so a slow converter's
follow-ups are not killed as a hang at the worker's timeout and filed as the converter's. The slow converter is
planted through a registry entry of this test."""

from __future__ import annotations

import time

from test_whose_bug import SinAsCosExporter

from fuzzer.check.follow_up import LOCATE_STOPPED, NOT_RERUN_BUDGET
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions
from fuzzer.check.source import prepare
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph

CONVERSION_S = 0.3


class SlowSinAsCos(SinAsCosExporter):
    """The sin-as-cos exporter, taking CONVERSION_S a conversion (onnx2tf with onnxsim takes seconds)."""

    name = "planted-slow-sin-exporter"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        time.sleep(CONVERSION_S)
        return super().convert_impl(source, options)


def sin_then_three() -> Graph:
    b = GraphBuilder()
    x = b.input((3, 5), DType.FLOAT32)
    y = b.op("sin", (x,), (3, 5), DType.FLOAT32)
    for op in ("neg", "abs", "relu"):
        y = b.op(op, (y,), (3, 5), DType.FLOAT32)
    return b.build((y,))


def test_follow_ups_stop_at_their_budget_and_say_so() -> None:
    prepared = prepare(sin_then_three(), 1, {}, 1.0)
    result = check_prepared(prepared, SlowSinAsCos(), {"opset": 17}, CheckOptions(follow_up_budget_s=0.1))
    assert result.verdict.symptom.json_name == "wrong_values"
    assert {LOCATE_STOPPED, NOT_RERUN_BUDGET} <= set(result.verdict.labels)


def test_with_time_to_spare_the_divergence_is_located_and_rerun() -> None:
    result = check_prepared(prepare(sin_then_three(), 1, {}, 1.0), SlowSinAsCos(), {"opset": 17})
    assert result.verdict.diverging_op == "sin"
    assert not {LOCATE_STOPPED, NOT_RERUN_BUDGET} & set(result.verdict.labels)
