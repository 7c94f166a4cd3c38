"""Small edits of a converted ONNX model that common conversion faults map to (Fix-Con's classes): an attribute the
source operator sets, a weight the source holds, a missing Cast, a missing rounding step, a missing modulo, a
float64 constant rounded to float32. Each edit family is one generator of candidates, listed in EDITS."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fuzzer.diagnosis.constant_edits import constant_edits, modulo_edits
from fuzzer.diagnosis.edit_target import Candidate, Target
from fuzzer.diagnosis.source_edits import attribute_edits, weight_edits
from fuzzer.diagnosis.step_edits import cast_edits, rounding_edits

EDITS: tuple[Callable[[Target], Iterator[Candidate]], ...] = (
    attribute_edits, weight_edits, cast_edits, rounding_edits, modulo_edits, constant_edits,
)


def candidates(target: Target) -> Iterator[Candidate]:
    """Every edit of every family, in EDITS order."""
    for family in EDITS:
        yield from family(target)
