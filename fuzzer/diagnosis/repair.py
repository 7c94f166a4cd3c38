"""A suggested fix for a divergence case, in the spirit of Fix-Con: small edits of the target model
(fuzzer/diagnosis/model_edits.py), each judged by the project's oracle on the case's inputs; the first edit after which
the outputs agree with the source's, on those inputs and on a few fresh draws, is the suggestion (bounded in tries
and seconds). The fresh draws keep out edits that only fit the one input (a Floor that happens to round 1.31 to 1).
"""

from __future__ import annotations

import itertools
import time

import onnx
import torch

from fuzzer.cases.case import CaseData
from fuzzer.cases.diagnosis import Repair
from fuzzer.cases.replay import case_expected
from fuzzer.check.judge import judge_model
from fuzzer.check.result import Expected
from fuzzer.check.source import expect
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source
from fuzzer.diagnosis.edit_target import Target
from fuzzer.diagnosis.model_edits import candidates
from fuzzer.support.device import require_device
from generators.materialize import random_tensor
from oracles.dynamic import at_second_shape
from oracles.verdict import Symptom

MAX_TRIES = 200
BUDGET_S = 30.0
FRESH_DRAWS = 3  # input sets beyond the case's own that a suggested edit must also agree on
DRAW_STRIDE = 7919  # fresh draws use seeds far from the case's own

__all__ = ["Repair", "agrees", "suggest_fix"]


def suggest_fix(case: CaseData, max_tries: int = MAX_TRIES, budget_s: float = BUDGET_S,
                converter: Converter | None = None) -> Repair | None:
    """The first edit of the case's target model that makes its outputs agree with the source's; None when the case
    is no divergence, has no model, already agrees, or no edit within the bounds helps. `converter`: the registry
    entry the case was found with, when it is not one of CONVERTERS."""
    converter = converter or CONVERTERS.get(case.converter)
    if not case.verdict.symptom.is_divergence or case.model is None or converter is None:
        return None
    require_device(case.device, f"{case.id} (found on {case.device})")
    expected = case_expected(case)
    if at_second_shape(case.verdict) and isinstance(expected, Expected) and expected.second is not None:
        expected = expected.second  # a dynamic export's bug shows at its second shape: repair it there
    if not isinstance(expected, Expected) or agrees(case.model, expected, converter):
        return None  # nothing to repair: the source fails, or the model agrees on these inputs
    target = Target.of(onnx.load_from_string(case.model), case)
    fresh = fresh_draws(case, expected)
    deadline = time.monotonic() + budget_s
    for tries, candidate in enumerate(itertools.islice(candidates(target), max_tries), start=1):
        if time.monotonic() > deadline:
            break
        data = candidate.model.SerializeToString()
        if agrees(data, expected, converter) and all(agrees(data, e, converter) for e in fresh):
            return Repair(candidate.kind, candidate.edit, candidate.description, tries, data)
    return None


def fresh_draws(case: CaseData, expected: Expected, count: int = FRESH_DRAWS) -> list[Expected]:
    """The case's module (its weights) on `count` fresh random input sets; draws the source fails on are left out.
    Float inputs ignore their declared range: a reduced case pins its inputs to the values that showed the bug."""
    graph, module = expected.source.graph, expected.source.module
    found = []
    for k in range(1, count + 1):
        gen = torch.Generator().manual_seed(case.seed + DRAW_STRIDE * k)
        drawn = tuple(random_tensor(t, gen, None if t.dtype.is_float else graph.ranges.get(n))
                      for n, t in graph.inputs.items())
        source = Source.on(expected.source.device, graph, module, drawn)
        settled = expect(source, {})
        if isinstance(settled, Expected):
            found.append(settled)
    return found


def agrees(model: bytes, expected: Expected, converter: Converter) -> bool:
    """The project's oracle (shape, dtype, then blamed values) finds the model's outputs agree with the source's."""
    return judge_model(model, expected, converter).verdict.symptom is Symptom.PASS
