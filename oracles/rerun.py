"""Flakiness: a divergence is rerun once before it is saved; disagreeing runs make a FLAKY verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from oracles.verdict import Symptom, Verdict

FLAKY_LABEL = "flaky"


@dataclass(frozen=True)
class RerunResult:
    """Whether two runs of the same target agree; reason: "stable", "symptom", "outputs" or "output-count"."""

    flaky: bool
    reason: str


def outputs_identical(first: Sequence[np.ndarray], second: Sequence[np.ndarray]) -> bool:
    """Bitwise equality of two runs' outputs (NaN payloads and signed zeros included)."""
    if len(first) != len(second):
        return False
    return all(_same_bits(a, b) for a, b in zip(first, second, strict=True))


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


def check_rerun(
    first: Verdict,
    second: Verdict,
    first_outputs: Sequence[np.ndarray] | None = None,
    second_outputs: Sequence[np.ndarray] | None = None,
) -> RerunResult:
    """Flaky when the symptoms, the per-output pass/fail, or (if given) the raw outputs of two runs differ."""
    oks = [m.ok for m in first.metrics], [m.ok for m in second.metrics]
    if first.symptom != second.symptom or first.signature != second.signature or oks[0] != oks[1]:
        return RerunResult(True, "symptom")
    if first_outputs is not None and second_outputs is not None:
        if len(first_outputs) != len(second_outputs):
            return RerunResult(True, "output-count")
        if not outputs_identical(first_outputs, second_outputs):
            return RerunResult(True, "outputs")
    return RerunResult(False, "stable")


def mark_flaky(verdict: Verdict, rerun: RerunResult) -> Verdict:
    """The verdict to record: unchanged when stable, else FLAKY labelled with the first run's symptom."""
    if not rerun.flaky:
        return verdict
    labels = sorted(set(verdict.labels) | {FLAKY_LABEL, f"first:{verdict.symptom.json_name}"})
    return replace(verdict, symptom=Symptom.FLAKY, labels=tuple(labels))
