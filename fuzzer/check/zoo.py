"""A zoo architecture through one converter, judged by the oracle.

A built zoo model enters the converters as a `Source` whose graph is only its signature (fuzzer/check/zoo_source.py):
the exporters read names, dtypes and dynamic axes from it and export the model itself. The target's outputs are
compared with the source's at the entry's tolerance class, and a divergence is blamed only where the target is far
from the float64 run of the same model while the float32 source is close to it (oracles.blame). A Keras model goes
through tf2onnx (fuzzer/check/zoo_keras.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzzer.check.zoo_keras import convert_keras, prepare_keras
from fuzzer.check.zoo_source import ZooSource, prepare_torch
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import StageError, TargetRun, UpstreamError
from fuzzer.converters.options import ConverterOptions
from generators.zoo import Framework, ZooModel
from oracles.blame import blame_output
from oracles.compare import DEFAULT_TOLERANCES, OutputComparison, Tolerance, compare_all
from oracles.signature import wrong_value_signature
from oracles.taxonomy import failure_verdict, upstream_verdict
from oracles.verdict import Stage, Symptom, Verdict

# The record of a campaign's finding in a zoo model, in its evidence folder (fuzzer/campaign/zoo_unit.py), which
# fuzzer/modelcheck/zoo_finding.py reduces.
EVIDENCE_RECORD = "zoo.json"
EVIDENCE_DIR = "zoo"  # the evidence folders' parent in the campaign folder, beside the graph cases
# The exporters each framework's zoo models go through.
EXPORTERS: Mapping[Framework, tuple[str, ...]] = {
    Framework.PYTORCH: ("torch-onnx-script", "torch-onnx-dynamo"),
    Framework.KERAS: ("tf2onnx",),
}


@dataclass(frozen=True)
class ZooResult:
    """One zoo model under one converter: the verdict, the steps' seconds and the converted model."""

    entry: str
    converter: str
    verdict: Verdict
    timings: Mapping[str, float]
    model: bytes | None = None
    rewrites: tuple[str, ...] = ()  # the converter's rewrites that changed the model, where it records them
    rewrite_classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # TargetRun.rewrite_classes
    # What the target was judged against where that is not the source (an ONNX tool's: the model it received, run on
    # ONNX Runtime), and the dtypes it computes in a narrower one: TargetRun's, kept for the blame.
    baseline: tuple[np.ndarray, ...] | None = None
    computed_in: Mapping[str, str] = field(default_factory=dict)


def prepare_zoo(zoo: ZooModel) -> ZooSource:
    """The model's source runs (float32, and float64 where its framework gives one) and its Source."""
    return prepare_keras(zoo) if zoo.entry.framework is Framework.KERAS else prepare_torch(zoo)


def convert(prepared: ZooSource, converter: Converter, options: ConverterOptions) -> TargetRun:
    """The converter's run on the zoo model (tf2onnx's on a Keras model)."""
    if prepared.zoo.entry.framework is Framework.KERAS:
        return convert_keras(prepared, options)
    return converter.convert(prepared.source, options)


def check_zoo(prepared: ZooSource, converter: Converter, options: ConverterOptions | Mapping[str, Any] | None = None
              ) -> ZooResult:
    """The verdict of one zoo model under one converter."""
    opts = converter.options(options)
    name = prepared.zoo.entry.name
    try:
        run = convert(prepared, converter, opts)
    except StageError as exc:
        verdict = failure_verdict(converter.name, exc.failure, converter.unsupported_messages)
        return ZooResult(name, converter.name, verdict, dict(exc.timings), exc.model)
    except UpstreamError as exc:
        verdict = upstream_verdict(converter.name, exc.upstream, exc.failure, exc.labels, exc.symptom)
        return ZooResult(name, converter.name, verdict, dict(exc.timings))
    start = time.perf_counter()
    verdict = judge_zoo(prepared, converter, run)
    return ZooResult(name, converter.name, verdict, {**run.timings, "oracle": time.perf_counter() - start},
                     run.model, tuple(run.rewrites), dict(run.rewrite_classes), run.baseline, dict(run.computed_in))


def judge_zoo(prepared: ZooSource, converter: Converter, run: TargetRun) -> Verdict:
    """Pass where every output is within the entry's tolerance of what the converter started from, or no further
    from the float64 reference than the float32 source is; else a wrong shape, dtype or values."""
    expected = prepared.eager if run.baseline is None else run.baseline
    judged = judge_outputs(prepared, run.outputs, expected, run.computed_in)
    metrics, failing = judged.metrics, judged.failing
    stage = converter.divergence_stage
    if not failing:
        return Verdict(Symptom.PASS, Stage.NONE, converter.name, metrics, labels=judged.labels)
    symptom = failing_symptom([metrics[i] for i in failing])
    first = failing[0]
    where = f"{prepared.zoo.entry.name}:{prepared.zoo.entry.outputs[first]}"
    message = (f"output {prepared.zoo.entry.outputs[first]} of zoo model {prepared.zoo.entry.name}: "
               f"{metrics[first].reason.value}, max_abs={metrics[first].max_abs:.3g}")
    signature = wrong_value_signature(converter.name, stage, symptom, where, prepared.dtypes[first])
    return Verdict(symptom, stage, converter.name, metrics, signature, message, ("zoo",))


@dataclass(frozen=True)
class JudgedOutputs:
    """Outputs against what they should be: each output's comparison, the failing ones the oracle blames (wrong
    values far from the float64 run while the float32 source is close), and why an unblamed divergence passed."""

    metrics: tuple[OutputComparison, ...]
    failing: list[int]
    labels: tuple[str, ...] = ()


def judge_outputs(prepared: ZooSource, outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray],
                  computed_in: Mapping[str, str] | None = None) -> JudgedOutputs:
    """`outputs` judged against `expected` at the entry's tolerance (widened where computed in a narrower dtype)."""
    tolerances = [computed_tolerance(prepared.tolerance, d, computed_in or {}) for d in prepared.dtypes]
    metrics = compare_all(outputs, expected, prepared.dtypes, tolerances)
    failing = [i for i, m in enumerate(metrics) if not m.ok]
    if not failing or prepared.reference is None or failing_symptom([metrics[i] for i in failing]) \
            is not Symptom.WRONG_VALUES:
        return JudgedOutputs(metrics, failing)
    blames = [blame_output(expected[i], outputs[i], prepared.reference[i], prepared.dtypes[i], tolerances[i])
              for i in failing]
    if not any(b.blamed for b in blames):
        return JudgedOutputs(metrics, [], (blames[0].reason,))
    return JudgedOutputs(metrics, failing)


def computed_tolerance(entry: Tolerance, dtype: str, computed_in: Mapping[str, str]) -> Tolerance:
    """The entry's tolerance for an output of `dtype`, widened where the target computes that dtype in a narrower one
    (OpenVINO's CPU plugin under a bf16 hint): by the ratio of the narrower dtype's default tolerance to `dtype`'s, so
    a deep stack's drift is allowed as the entry allows it, in the precision the target computes in."""
    narrower = computed_in.get(dtype)
    if narrower is None or dtype not in DEFAULT_TOLERANCES or narrower not in DEFAULT_TOLERANCES:
        return entry
    own, other = DEFAULT_TOLERANCES[dtype], DEFAULT_TOLERANCES[narrower]
    scale = max(other.rtol / own.rtol, 1.0) if own.rtol else 1.0
    return Tolerance(entry.rtol * scale, max(entry.atol * scale, other.atol))


def failing_symptom(metrics: list[OutputComparison]) -> Symptom:
    """A wrong shape before a wrong dtype before wrong values."""
    reasons = {m.reason.value for m in metrics}
    if "shape" in reasons:
        return Symptom.WRONG_SHAPE
    if "dtype" in reasons:
        return Symptom.WRONG_DTYPE
    return Symptom.WRONG_VALUES
