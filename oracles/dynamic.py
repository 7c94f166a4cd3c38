"""Verdicts of dynamic exports: the labels that say what ran, and a signature of their own for what only they show.

A dynamic export is judged at the shape it was traced with and, when that passes, at a second shape. A failure the
static export of the same graph does not share, or one seen only at the second shape, is the dynamic export's: it is
labelled so and its signature is prefixed, so it never merges with a static bug of the same operator.
"""

from __future__ import annotations

from dataclasses import replace

from oracles.verdict import Symptom, Verdict

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


def at_traced_shape(dynamic: Verdict, static: Verdict) -> Verdict:
    """A dynamic export's bug at its traced shape, given the static export's verdict on the same graph: the
    dynamic export's own unless the static one shares it."""
    return dynamic if static.is_bug else dynamic_only(dynamic, at_second_shape=False)


def with_second_shape(traced: Verdict, second: Verdict | None) -> Verdict:
    """A dynamic export's verdict from its run at the traced shape (no bug) and at the second one (None: not run,
    as when the traced run did not pass or the graph has no second shape)."""
    if second is None:
        return traced.with_labels(*((TRACED_ONLY,) if traced.symptom is Symptom.PASS else ()))
    if second.symptom is Symptom.PASS:
        return traced.with_labels(*second.labels)
    return dynamic_only(second, at_second_shape=True)
