"""Whose bug a case is: its cross-checks (fuzzer/cases/crosscheck.py), suggested fix (fuzzer/cases/repair.py) and
blame (fuzzer/cases/blame.py, from the cross-checks and its converted model examined elsewhere), and the setting that
avoids it meanwhile (fuzzer/cases/workaround.py), computed once and kept in the case (case.json, report.md). The
reducer calls this on each reduced case."""

from __future__ import annotations

import dataclasses

from fuzzer.cases.blame import blame_case
from fuzzer.cases.case import CaseData
from fuzzer.cases.crosscheck import LOST, cross_checks
from fuzzer.cases.evidence import ModelEvidence, examine
from fuzzer.cases.repair import suggest_fix
from fuzzer.cases.replay import case_expected
from fuzzer.cases.workaround import find_workaround
from fuzzer.check.result import Expected
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from oracles.dynamic import at_second_shape


def with_diagnosis(case: CaseData, converter: Converter | None = None) -> CaseData:
    """The case with its cross-checks, suggested fix, blame and workaround filled in (each reruns the case's graph
    in this process); `converter`: the registry entry the case was found with, when it is not one of CONVERTERS."""
    case = dataclasses.replace(case, cross_checks=cross_checks(case, converter),
                               suggested_fix=suggest_fix(case, converter=converter))
    case = dataclasses.replace(case, blame=blame_case(case, model_evidence(case, converter), converter))
    return dataclasses.replace(case, workaround=find_workaround(case, converter))


def model_evidence(case: CaseData, converter: Converter | None = None) -> ModelEvidence | None:
    """The case's converted model examined by ONNX's checker, ONNX Runtime and onnx.reference, on the inputs that
    show its bug; None without a model, or for a death, which would take this process with it."""
    if case.model is None or case.verdict.symptom in LOST:
        return None
    expected = case_expected(case)
    if not isinstance(expected, Expected):
        return None
    if at_second_shape(case.verdict) and expected.second is not None:
        expected = expected.second
    converter = converter or CONVERTERS.get(case.converter)
    return examine(case.model, expected, converter.target_runtime() if converter is not None else None)
