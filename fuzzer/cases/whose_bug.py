"""Whose bug a case is: its cross-checks (fuzzer/cases/crosscheck.py) and suggested fix (fuzzer/cases/repair.py),
computed once and kept in the case (case.json, report.md). The reducer calls this on each reduced case."""

from __future__ import annotations

import dataclasses

from fuzzer.cases.case import CaseData
from fuzzer.cases.crosscheck import cross_checks
from fuzzer.cases.repair import suggest_fix


def with_diagnosis(case: CaseData) -> CaseData:
    """The case with its cross-checks and suggested fix filled in (each reruns the case's graph in this process)."""
    return dataclasses.replace(case, cross_checks=cross_checks(case), suggested_fix=suggest_fix(case))
