"""Verdicts of dynamic exports: the labels that say what ran, and a signature of their own for what only they show.

A dynamic export is judged at the shape it was traced with and, when that passes, at a second shape. A failure the
static export of the same graph does not share, or one seen only at the second shape, is the dynamic export's: it is
labelled so and its signature is prefixed, so it never merges with a static bug of the same operator.
"""

from __future__ import annotations

from dataclasses import replace

from oracles.verdict import Verdict

DYNAMIC_SHAPE = "dynamic-shape"  # shows only when the export marks dims dynamic
SECOND_SHAPE = "second-shape"  # seen when the model ran at the second shape (the traced shape passed)
TRACED_ONLY = "dynamic-traced-only"  # exported with dynamic dims, but the graph has no second shape to run


def dynamic_only(verdict: Verdict, at_second_shape: bool) -> Verdict:
    """The verdict as the dynamic export's own bug: labelled, and its signature prefixed."""
    labels = (DYNAMIC_SHAPE, SECOND_SHAPE) if at_second_shape else (DYNAMIC_SHAPE,)
    signature = verdict.signature if verdict.signature.startswith(f"{DYNAMIC_SHAPE}-") else \
        f"{DYNAMIC_SHAPE}-{verdict.signature}"
    return replace(verdict.with_labels(*labels), signature=signature)


def at_second_shape(verdict: Verdict) -> bool:
    """Whether the verdict is what the run at the second shape showed."""
    return SECOND_SHAPE in verdict.labels
