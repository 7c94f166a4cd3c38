"""Discontinuity labels: the inputs of a divergence sit where a tiny upstream difference flips an output.

What a discontinuity is, for each operator, lives on the operator's class (`OpSpec.discontinuity`, detectors in
generators/ops/discontinuity.py); here the oracle asks for it, and reads signed zeros off the outputs. A label is
information for triage, not a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from generators.ops.discontinuity import LABELS, SIGNED_ZERO
from oracles.compare import has_signed_zero_mismatch

__all__ = ["LABELS", "labels_for", "output_labels"]


class Operator(Protocol):
    """What the oracle asks of an operator (generators.ops.base.OpSpec, without importing torch or z3 here)."""

    def discontinuities(self, attrs: Mapping[str, Any], inputs: Sequence[np.ndarray]) -> frozenset[str]: ...


def labels_for(op: Operator, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any] | None = None) -> set[str]:
    """The labels of one application of `op` to these (numpy) inputs; empty for a continuous op."""
    return set(op.discontinuities(attrs or {}, inputs))


def output_labels(actual: np.ndarray, expected: np.ndarray) -> set[str]:
    """Labels read off an output pair: signed_zero where -0.0 meets +0.0."""
    return {SIGNED_ZERO} if has_signed_zero_mismatch(np.asarray(actual), np.asarray(expected)) else set()
