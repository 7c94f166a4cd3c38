"""A target computing in a narrower type (OpenVINO's CPU plugin: float64 in float32, and all floats in bfloat16 under
a bf16 hint): its drift from the float64 answer is judged against the source's own run in that type. Within
NARROW_SLACK of it, a divergence passes, labelled; a value off by more stays a bug, and a target that does not narrow
is left alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from fuzzer.check.narrowed_drift import COMPUTED_NARROW, bfloat16_outputs, judged_narrowed
from fuzzer.check.pipeline import CheckOptions, check_prepared, prepare
from fuzzer.check.result import Expected
from fuzzer.check.source import expect
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.openvino_cpu import cpu_precisions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from generators.materialize import materialize
from oracles.compare import compare_all, default_tolerance
from oracles.verdict import Stage, Symptom, Verdict

pytest.importorskip("openvino")


def matmul_chain() -> tuple[Expected, TargetRun]:
    """Two float32 matmuls on 64-wide rows, run by the real plugin under a bf16 hint."""
    if "bf16" not in cpu_precisions():
        pytest.skip("this CPU does not compute in bf16: the plugin ignores the hint")
    g = GraphBuilder()
    a, b, c = g.input((4, 64)), g.weight((64, 64)), g.weight((64, 8))
    graph = g.build((g.op("matmul", (g.op("matmul", (a, b), (4, 64)), c), (4, 8)),))
    converter = CONVERTERS["openvino-pytorch"]
    result = check_prepared(prepare(graph, 0, {}, 1.0), converter, converter.options({"precision": "bf16"}),
                            CheckOptions(rerun=False, locate=False, culprit=False))
    assert result.expected is not None and result.target is not None
    return result.expected, result.target


def wrong_values(expected: Expected, run: TargetRun) -> Verdict:
    """The verdict at float32's own tolerance, as a target that does not narrow would be judged."""
    metrics = tuple(compare_all(run.outputs, expected.eager, ("float32",), [default_tolerance("float32")]))
    return Verdict(Symptom.WRONG_VALUES, Stage.GRAPH_OPTIMIZATION, "openvino-pytorch", metrics, signature="s")


def test_bfloat16_drift_within_the_sources_own_bfloat16_error_passes_and_a_real_error_stays() -> None:
    expected, run = matmul_chain()
    assert run.computed_in["float32"] == "bfloat16"
    verdict = wrong_values(expected, run)
    assert not verdict.metrics[0].ok  # float32's tolerance does not hold bf16 arithmetic
    judged = judged_narrowed(verdict, expected, run)
    assert judged.symptom is Symptom.PASS and COMPUTED_NARROW in judged.labels and not judged.is_bug
    off = dataclasses.replace(run, outputs=tuple(o * np.float32(1.25) for o in run.outputs))
    assert judged_narrowed(wrong_values(expected, off), expected, off).symptom is Symptom.WRONG_VALUES
    wide = dataclasses.replace(run, computed_in={"float64": "float32"})
    assert judged_narrowed(verdict, expected, wide) is verdict


def test_the_yardstick_is_the_source_run_in_bfloat16() -> None:
    expected, _ = matmul_chain()
    narrow = bfloat16_outputs(expected)
    assert narrow is not None and narrow[0].dtype == np.float64
    error = np.max(np.abs(narrow[0] - expected.reference[0]))
    assert 0 < error < 1  # bfloat16's 8-bit mantissa: off, but not wrong


def test_float64_computed_in_float32_is_judged_against_the_sources_own_float32_run() -> None:
    """The plugin computes float64 in float32: sin of arguments near 1e4 loses the argument's float64 digits, far
    beyond float32's tolerance on the output, as the source run in float32 does too; it passes, labelled, and the
    same run 25% off stays a bug."""
    g = GraphBuilder()
    x = g.input((4, 8), DType.FLOAT64)
    graph = g.build((g.op("sin", (x,), (4, 8), DType.FLOAT64),))
    expected = _expected(graph, (torch.linspace(1e4, 3e4, 32, dtype=torch.float64).reshape(4, 8),))
    converter = CONVERTERS["openvino-pytorch"]
    run = converter.convert(expected.source, converter.options({"precision": "f32"}))
    assert run.computed_in["float64"] == "float32"
    metrics = tuple(compare_all(run.outputs, expected.eager, ("float64",), [default_tolerance("float32")]))
    verdict = Verdict(Symptom.WRONG_VALUES, Stage.GRAPH_OPTIMIZATION, converter.name, metrics, signature="s")
    assert not verdict.metrics[0].ok  # float32's tolerance on the output does not hold a rounded argument
    judged = judged_narrowed(verdict, expected, run)
    assert judged.symptom is Symptom.PASS and judged.labels == ("not-blamed:within-float32-computation",)
    off = dataclasses.replace(run, outputs=tuple(o * 1.25 for o in run.outputs))
    assert judged_narrowed(verdict, expected, off).symptom is Symptom.WRONG_VALUES


def _expected(graph: Graph, inputs: tuple[torch.Tensor, ...]) -> Expected:
    expected = expect(Source(graph, materialize(graph, 0), inputs), {})
    assert isinstance(expected, Expected)
    return expected
