"""Folding a BatchNormalization's scale into half-type Conv weights changes rounding legitimately; by how much is
decided here. A tool's folded model whose error (against the float64 answer) is at most FOLD_SLACK times that of the
fold computed in float32 and rounded once (converters/ideal_fold.py) is a rounding difference: the divergence passes,
labelled FOLD_ROUNDING, and is not filed. A larger error is the tool's defect: it stays a bug, labelled
FOLD_BEYOND. bench/fold_rounding.py measured the slack (docs/oracle.md, "Rounding of folds")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from fuzzer.check.result import Expected
from fuzzer.converters.conversion import Steps, TargetRun
from fuzzer.converters.ideal_fold import ideal_fold
from fuzzer.converters.runtime import declared_input_names, run_model
from oracles.judgement import NOT_BLAMED
from oracles.verdict import Stage, Symptom, Verdict

# The float16 folds that compute in float16 arithmetic (ONNX Runtime, onnxslim, the onnxscript optimizer) reach 3.7
# times the ideal fold's error on bench/fold_rounding.py's models, 11 of 40 beyond twice it; onnxsim's 2.5; the
# unfolded model stays within 1.0. Twice is beyond what rounding the folded weights once can cost.
FOLD_SLACK = 2.0
FOLD_ROUNDING = f"{NOT_BLAMED}:fold-rounding"  # within FOLD_SLACK of the ideal fold: not filed
FOLD_BEYOND = "fold-beyond-float32-rounding"  # farther: the tool's fold is filed


def fold_errors(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> tuple[float, ...]:
    """Per output, the largest absolute difference from the float64 answer where both are finite (inf where the
    output has another shape)."""
    errors = []
    for out, ref in zip(outputs, reference, strict=True):
        a, r = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        if a.shape != r.shape:
            errors.append(float("inf"))
            continue
        finite = np.isfinite(a) & np.isfinite(r)
        errors.append(float(np.max(np.abs(a[finite] - r[finite]))) if finite.any() else 0.0)
    return tuple(errors)


def within_rounding(tool: Sequence[float], ideal: Sequence[float]) -> bool:
    """Whether every output's error is at most FOLD_SLACK times the ideal fold's."""
    return all(t <= FOLD_SLACK * i for t, i in zip(tool, ideal, strict=True))


def judged_fold(verdict: Verdict, expected: Expected, run: TargetRun) -> Verdict:
    """`verdict` of a wrong-values divergence at graph optimization, where the model received had Conv+BatchNorm pairs
    in a half type that the tool folded: passed as rounding, or labelled a defect; unchanged elsewhere (and where
    the ideal fold does not run)."""
    if verdict.symptom is not Symptom.WRONG_VALUES or verdict.stage is not Stage.GRAPH_OPTIMIZATION or \
            run.baseline_model is None or run.model is None:
        return verdict
    received = onnx.load_from_string(run.baseline_model)
    ideal = ideal_fold(received)
    if ideal is None or not _folded_by_tool(received, onnx.load_from_string(run.model)):
        return verdict
    try:
        outputs, _ = run_model(ideal.SerializeToString(), expected.source, Steps(),
                               names=declared_input_names(received, expected.source))
    except Exception:  # the ideal fold not running says nothing of the tool's
        return verdict
    if len(outputs) != len(run.outputs):
        return verdict
    tool, best = fold_errors(run.outputs, expected.reference), fold_errors(outputs, expected.reference)
    if within_rounding(tool, best):
        return Verdict(Symptom.PASS, Stage.NONE, verdict.converter, verdict.metrics,
                       labels=tuple(sorted({*verdict.labels, FOLD_ROUNDING})))
    return verdict.with_labels(FOLD_BEYOND)


def _folded_by_tool(received: onnx.ModelProto, made: onnx.ModelProto) -> bool:
    """Whether the tool's model has fewer BatchNormalization nodes than the one it received."""
    def norms(model: onnx.ModelProto) -> int:
        return sum(1 for node in model.graph.node if node.op_type == "BatchNormalization")
    return norms(made) < norms(received)
