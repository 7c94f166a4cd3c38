"""The cheapest setting that avoids a case's bug until it is fixed: the case's converter lists the settings a user
could change (capabilities.AvoidsBugs, cheapest first); they are tried on the reduced case's own inputs and the
first under which the outputs agree, re-run on a source made afresh ("re-tested"), is the workaround. A setting a
cross-check already ran is not run again where it failed there; the order stays the converter's, cheapest first.
At most MAX_RUNS conversions per case, re-tests included."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fuzzer.cases.case import CaseData
from fuzzer.cases.diagnosis import AT_LEVEL, PASSES, SKIPPED, CrossCheck
from fuzzer.cases.fault_site import case_culprits
from fuzzer.cases.remedy import Workaround
from fuzzer.cases.replay import case_expected
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions, Expected
from fuzzer.converters import CONVERTERS
from fuzzer.converters.at_level import AtLevel
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import AvoidsBugs
from fuzzer.converters.ort_levels import LEVELS
from fuzzer.converters.schema import noted_opset
from fuzzer.converters.setting import Hints, Setting
from fuzzer.diagnosis.blame import KERNEL_KEY
from fuzzer.diagnosis.crosscheck import outcome, why_not_here
from oracles.verdict import Symptom, Verdict

MAX_RUNS = 6  # conversions per case (re-tests included): a reduced case converts in well under a second each
TRY_CHECK = CheckOptions(rerun=False, locate=False, culprit=False)  # only whether the outputs agree counts
CROSS_CHECKED = " (its cross-check)"


@dataclass(frozen=True)
class Tried:
    """One setting's outcome: the line the case keeps, whether the outputs agreed twice, conversions it cost."""

    line: str
    found: bool
    runs: int


def find_workaround(case: CaseData, converter: Converter | None = None) -> Workaround | None:
    """The case's workaround (its cross-checks read when filled in); None when its source fails or its converter is
    unknown: there is nothing to try then. `converter`: the registry entry the case was found with."""
    converter = converter or CONVERTERS.get(case.converter)
    prepared = case_expected(case)
    if converter is None or not isinstance(prepared, Expected):
        return None
    options = converter.options(case.converter_options)
    settings = converter.avoid_settings(options, hints(case)) if isinstance(converter, AvoidsBugs) else ()
    known = checked_outcomes(case.cross_checks or (), converter)
    tried: list[str] = []
    runs = 0
    for setting in settings:  # cheapest first, as the converter lists them; a cross-check spares a failing run
        if runs >= MAX_RUNS:
            tried.append(f"{setting.description}: not tried (at most {MAX_RUNS} runs a case)")
            continue
        result = _try(setting, case, prepared, converter, known.get(key_of(setting, converter)))
        tried.append(result.line)
        runs += result.runs
        if result.found:
            return Workaround(tuple(tried), setting.description, setting.converter, dict(setting.options),
                              setting.code, setting.level)
    return Workaround(tuple(tried))


def hints(case: CaseData) -> Hints:
    """What the case says of its bug, as its converter's settings read it (case_culprits: the blame's own reading)."""
    kernel = case.blame is not None and case.blame.component.key == KERNEL_KEY
    return Hints(case.verdict.symptom.is_divergence, case_culprits(case), kernel, noted_opset(case.verdict.message))


def _try(setting: Setting, case: CaseData, prepared: Expected, own: Converter, known: str | None) -> Tried:
    """Run one setting, and once more on a fresh source when the outputs agree (a pass must hold twice)."""
    if known is not None and known != PASSES:
        return Tried(f"{setting.description}: {known}{CROSS_CHECKED}", False, 0)
    converter = runner(setting.converter, setting.level, own)
    why = f"no converter {setting.converter!r} here" if converter is None else \
        why_not_here(converter, setting.options, case.verdict)
    if why:
        return Tried(f"{setting.description}: {SKIPPED}{why}", False, 0)
    assert converter is not None
    first = _verdict(prepared, converter, setting.options)
    if first.symptom is not Symptom.PASS:
        return Tried(f"{setting.description}: {outcome(case.verdict, first)}", False, 1)
    again = case_expected(case)  # a source made afresh: nothing of the first run's export is reused
    second = _verdict(again, converter, setting.options) if isinstance(again, Expected) else first
    if second.symptom is not Symptom.PASS:
        return Tried(f"{setting.description}: passed once, then {outcome(case.verdict, second)}", False, 2)
    return Tried(f"{setting.description}: {PASSES}, re-tested", True, 2)


def runner(name: str, level: str, own: Converter) -> Converter | None:
    """The converter a setting's (or a workaround's) re-run uses: the case's own entry by its name (a planted one
    too), else the registry's; its model run at ONNX Runtime `level` when one is named."""
    converter = own if name == own.name else CONVERTERS.get(name)
    if converter is None or level in ("", converter.target_level):
        return converter
    return AtLevel(converter, level)


def _verdict(prepared: Expected, converter: Converter, options: Mapping[str, Any]) -> Verdict:
    return check_prepared(prepared, converter, options, TRY_CHECK).verdict


Key = tuple[str, tuple[tuple[str, str], ...], str]


def key_of(setting: Setting, own: Converter) -> Key:
    """What makes a setting's run the same as a cross-check's: converter, options as it parses them, the level."""
    return _key(setting.converter, setting.options, "" if setting.level == "disabled" else setting.level, own)


def checked_outcomes(checks: Sequence[CrossCheck], own: Converter) -> dict[Key, str]:
    """The outcome of each cross-check that ran (same bug, passes, other failure), by the key of its run."""
    ran = (c for c in checks if not c.outcome.startswith(SKIPPED))
    return {_key(c.converter, c.options, _level(c), own): c.outcome for c in ran}


def _level(check: CrossCheck) -> str:
    """The ONNX Runtime level an exporter's cross-check ran its model at ("" for its own run)."""
    if "level" in check.options:  # ort-optimizer's own level is an option, not a session around it
        return ""
    return next((lv for lv in LEVELS[1:] if check.name == AT_LEVEL.format(lv)), "")


def _key(name: str, options: Mapping[str, Any], level: str, own: Converter) -> Key:
    converter = own if name == own.name else CONVERTERS.get(name)
    try:
        parsed = converter.options(options).to_json() if converter is not None else dict(options)
    except (TypeError, ValueError):
        parsed = dict(options)
    return name, tuple(sorted((k, repr(v)) for k, v in parsed.items())), level

