"""Whose bug a case is: its cross-checks (crosscheck.py), suggested fix (repair.py) and blame (blame.py, from the
cross-checks and its converted model examined elsewhere), and the setting that avoids it meanwhile (workaround.py),
computed once and kept in the case (case.json, report.md). The reducer calls this on each reduced case."""

from __future__ import annotations

import dataclasses

from fuzzer.cases.case import CaseData
from fuzzer.cases.replay import case_expected
from fuzzer.check.result import Expected, Prepared
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import OwnRuntime
from fuzzer.diagnosis.blame import blame_case
from fuzzer.diagnosis.crosscheck import LOST, cross_checks, deciding_checks
from fuzzer.diagnosis.evidence import ModelEvidence, examine
from fuzzer.diagnosis.repair import suggest_fix
from fuzzer.diagnosis.workaround import find_workaround
from oracles.dynamic import at_second_shape


def with_diagnosis(case: CaseData, converter: Converter | None = None) -> CaseData:
    """The case with its cross-checks, suggested fix, blame and workaround filled in (each reruns the case's graph
    in this process); `converter`: the registry entry the case was found with, when it is not one of CONVERTERS."""
    case = dataclasses.replace(case, cross_checks=cross_checks(case, converter),
                               suggested_fix=suggest_fix(case, converter=converter))
    case = dataclasses.replace(case, blame=blame_case(case, model_evidence(case, converter), converter))
    return dataclasses.replace(case, workaround=find_workaround(case, converter))


def with_blame(case: CaseData, converter: Converter | None = None, prepared: Prepared | None = None,
               own_framework: bool = False) -> CaseData:
    """The case with whose bug it is, from the checks that decide it (deciding_checks) and its converted model
    examined elsewhere: run when a signature is first filed, so every case names its owner from the first minute;
    a later diagnosis (with_diagnosis) adds the rest. `prepared`: the source as the case's test settled it;
    `own_framework`: as deciding_checks takes it."""
    converter = converter or CONVERTERS.get(case.converter)
    if converter is None:
        return case
    checks = deciding_checks(case, converter, prepared, own_framework) if case.verdict.symptom not in LOST else ()
    case = dataclasses.replace(case, cross_checks=checks)
    return dataclasses.replace(case, blame=blame_case(case, model_evidence(case, converter, prepared), converter))


def model_evidence(case: CaseData, converter: Converter | None = None,
                   prepared: Prepared | None = None) -> ModelEvidence | None:
    """The case's converted model examined by ONNX's checker, ONNX Runtime and onnx.reference, on the inputs that
    show its bug; None without a model, or for a death, which would take this process with it."""
    if case.model is None or case.verdict.symptom in LOST:
        return None
    expected = case_expected(case) if prepared is None else prepared
    if not isinstance(expected, Expected):
        return None
    if at_second_shape(case.verdict) and expected.second is not None:
        expected = expected.second
    converter = converter or CONVERTERS.get(case.converter)
    return examine(case.model, expected, converter.target_runtime() if isinstance(converter, OwnRuntime) else None)
