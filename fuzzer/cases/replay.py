"""Replaying a saved case on the installed library versions: reproduces, fixed, or fails differently."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from fuzzer.cases.case import CaseData
from fuzzer.check.dynamic import with_second_inputs
from fuzzer.check.pipeline import CheckOptions, available_converter, check_prepared, prepare, run_check
from fuzzer.check.result import Expected, Prepared
from fuzzer.check.source import expect
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.support.device import require_device
from fuzzer.support.errors import UsageError
from fuzzer.support.tensors import to_torch
from generators.materialize import GraphModule
from generators.values import ValueStrategy
from oracles.verdict import Verdict

REPLAY_CHECK = CheckOptions(rerun=True, locate=True, culprit=False)


class Outcome(enum.IntEnum):
    """What a replay shows; every outcome but FIXED means the bug (or another) still shows."""

    REPRODUCES = 0
    FIXED = 1
    DIFFERENT = 2

    @property
    def label(self) -> str:
        return {0: "reproduces", 1: "fixed", 2: "fails differently"}[int(self)]


@dataclass(frozen=True)
class Replay:
    case_id: str
    outcome: Outcome
    verdict: Verdict
    expected_signature: str

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case_id, "outcome": self.outcome.label, "signature": self.expected_signature,
                "now": {"symptom": self.verdict.symptom.json_name, "signature": self.verdict.signature}}

    def line(self) -> str:
        text = f"{self.case_id}: {self.outcome.label}"
        if self.outcome is Outcome.DIFFERENT:
            text += f" (now {self.verdict.signature or self.verdict.symptom.json_name})"
        elif self.outcome is Outcome.FIXED:
            text += f" (now {self.verdict.symptom.json_name})"
        return text


def case_source(case: CaseData) -> Source | None:
    """The case's own module, weights and inputs (None when the folder holds no input data)."""
    if len(case.inputs) != len(case.graph.inputs) or set(case.weights) != set(case.graph.weights):
        return None
    graph = case.graph
    weights = {n: to_torch(case.weights[n], graph.types[n].shape) for n in graph.weights}
    inputs = tuple(to_torch(x, t.shape) for x, t in zip(case.inputs, graph.inputs.values(), strict=True))
    return Source.on(case.device, graph, GraphModule(graph, weights), inputs)


def second_shape_inputs(case: CaseData) -> tuple[torch.Tensor, ...]:
    """The case's inputs at its dynamic export's second shape (empty when it has none)."""
    if len(case.second_inputs) != len(case.graph.inputs):
        return ()
    return tuple(to_torch(x, tuple(x.shape)) for x in case.second_inputs)


def case_expected(case: CaseData) -> Prepared:
    """The case's source settled as a check judges it (eager and float64 outputs), on its saved inputs when present,
    else on its seed's, with a dynamic case's saved second shape; a source that fails gives its own verdict."""
    source = case_source(case)
    if source is None:
        return prepare(case.graph, case.seed, {}, REPLAY_CHECK.input_budget_s, case.device, ValueStrategy(case.values))
    expected = expect(source, {})
    second = second_shape_inputs(case)
    if case.dynamic is not None and second and isinstance(expected, Expected):
        # A dynamic case runs its saved second shape, not one searched again.
        expected = with_second_inputs(expected, DynamicAxes.from_json(case.dynamic), second, {})
    return expected


def replay_verdict(case: CaseData, check_options: CheckOptions = REPLAY_CHECK,
                   registry: Mapping[str, Converter] = CONVERTERS) -> Verdict:
    """The verdict of the case's graph under its converter (of `registry`) and options, on the saved inputs when
    present."""
    if case.converter not in registry:
        raise UsageError(f"{case.id}: unknown converter {case.converter!r}")
    try:
        options: Any = registry[case.converter].options(case.converter_options)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{case.id}: bad converter options: {exc}") from None
    require_device(case.device, f"{case.id} (found on {case.device})")
    if case_source(case) is None:
        return run_check(case.graph, case.seed, case.converter, options, check_options, case.device,
                         ValueStrategy(case.values), registry).verdict
    return check_prepared(case_expected(case), available_converter(case.converter, registry), options,
                          check_options).verdict


def replay(case: CaseData, check_options: CheckOptions = REPLAY_CHECK,
           registry: Mapping[str, Converter] = CONVERTERS) -> Replay:
    """The case replayed under its converter of `registry`: it reproduces, is fixed, or fails differently."""
    return replay_outcome(case, replay_verdict(case, check_options, registry))


def replay_outcome(case: CaseData, verdict: Verdict) -> Replay:
    """What a verdict of the case's graph now says of the case: it reproduces, is fixed, or fails differently."""
    if verdict.signature == case.signature and verdict.is_bug == case.verdict.is_bug:
        outcome = Outcome.REPRODUCES
    elif not verdict.is_bug:
        outcome = Outcome.FIXED
    else:
        outcome = Outcome.DIFFERENT
    return Replay(case.id, outcome, verdict, case.signature)
