"""Every corpus case replayed on the installed versions. A known bug that still shows is an expected failure
(xfail, strict); one that no longer shows is reported as fixed (a skip that names the installed versions that differ
from the case's recorded ones, listed with its reason in every run's summary: -rs), and it fails only on the very
stack the case was recorded on: there the bug cannot have been fixed upstream, so convsmith itself broke. A known
bug that now fails with a different signature is a plain failure; a must-pass case must pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest
from test_whose_bug import SinAsCosExporter

from fuzzer.cases.case import CaseData, case_from_result, collect_versions
from fuzzer.cases.folder import read_case
from fuzzer.cases.replay import REPLAY_CHECK, Outcome, Replay, case_expected, replay, replay_outcome
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from generators.builder import GraphBuilder
from generators.dtypes import DType

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
UNCOMPARED = ("os",)  # the kernel's version changes under any machine's feet: not part of the stack compared


class KnownBugReproduces(Exception):
    """Raised when a known-bug case still shows its bug: the only failure its xfail accepts."""


def stack_differences(recorded: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The recorded versions the installed ones differ from: name -> (recorded, installed)."""
    names = [name for name in recorded if name not in UNCOMPARED]
    installed = collect_versions([name for name in names if name != "python"])
    return {name: (recorded[name], installed.get(name, "not installed")) for name in names
            if installed.get(name, "not installed") != recorded[name]}


def judge_known_bug(case: CaseData, result: Replay) -> None:
    """A known-bug case's replay: KnownBugReproduces while it shows; skipped as fixed when the stack moved on;
    a failure when it fails differently, or stopped showing on the stack it was recorded on."""
    assert result.outcome is not Outcome.DIFFERENT, f"{result.line()}: update or re-promote the case"
    if result.outcome is Outcome.REPRODUCES:
        raise KnownBugReproduces(result.line())
    differences = stack_differences(case.versions)
    if not differences:
        recorded = ", ".join(f"{name} {version}" for name, version in case.versions.items())
        pytest.fail(f"{result.line()} on the stack it was recorded on ({recorded}): convsmith itself broke")
    now = ", ".join(f"{name} {installed}" for name, (_, installed) in differences.items())
    then = ", ".join(f"{name} {recorded}" for name, (recorded, _) in differences.items())
    pytest.skip(f"fixed on {now} (recorded on {then}): {result.line()}; re-promote it with --expect pass or "
                "delete it")


def _params() -> list:
    params = []
    for path in sorted(p.parent for p in CORPUS.glob("*/case.json")):
        case = read_case(path)
        marks = [pytest.mark.xfail(strict=True, raises=KnownBugReproduces, reason=f"known bug {case.signature}")] \
            if case.expectation == "bug" else []
        params.append(pytest.param(path, id=path.name[:80], marks=marks))
    return params


@pytest.mark.parametrize("folder", _params())
def test_corpus_case(folder: Path) -> None:
    case = read_case(folder)
    assert case.expectation in ("bug", "pass"), f"{folder}: promoted cases carry an expectation"
    result = replay(case)
    if case.expectation == "bug":
        judge_known_bug(case, result)
        return
    assert not result.verdict.is_bug, f"{case.id} must pass but gives {result.verdict.signature}"


# ---- the outcomes of a known bug, with the bug planted through a registry converter and then fixed -----------

def _sin_case() -> CaseData:
    """A known-bug case found under planted-sin-exporter (every Sin exported as Cos), on the installed stack."""
    g = GraphBuilder()
    x = g.input((2, 3), DType.FLOAT32)
    graph = g.build((g.op("sin", (x,), (2, 3), DType.FLOAT32),))
    planted = SinAsCosExporter()
    found = check_prepared(prepare(graph, 0, {}, 1.0), planted, None, REPLAY_CHECK)
    assert found.verdict.is_bug, found.verdict
    versions = collect_versions(planted.distributions)
    case = case_from_result(found, graph, 0, planted.name, {k: v for k, v in versions.items() if k != "os"})
    return dataclasses.replace(case, expectation="bug")


def _replayed(case: CaseData, converter: Converter) -> Replay:
    """The case replayed as test_corpus_case replays it, under `converter` in place of the case's registry entry."""
    verdict = check_prepared(case_expected(case), converter, case.converter_options, REPLAY_CHECK).verdict
    return replay_outcome(case, verdict)


@pytest.fixture(scope="module")
def sin_case() -> CaseData:
    return _sin_case()


def test_a_known_bug_that_still_shows_is_the_expected_failure(sin_case: CaseData) -> None:
    result = _replayed(sin_case, SinAsCosExporter())
    assert result.outcome is Outcome.REPRODUCES
    with pytest.raises(KnownBugReproduces, match="reproduces"):
        judge_known_bug(sin_case, result)


def test_a_known_bug_fixed_on_a_newer_stack_says_fixed_and_names_the_versions_that_differ(sin_case: CaseData) -> None:
    older = dataclasses.replace(sin_case, versions={**sin_case.versions, "torch": "2.0.0", "onnx": "1.14.0"})
    result = _replayed(older, CONVERTERS["torch-onnx-script"])  # the same exporter without the planted fault
    assert result.outcome is Outcome.FIXED
    with pytest.raises(pytest.skip.Exception) as skipped:
        judge_known_bug(older, result)
    message = str(skipped.value)
    installed = collect_versions(("torch", "onnx"))
    assert message.startswith(f"fixed on torch {installed['torch']}, onnx {installed['onnx']} "
                              "(recorded on torch 2.0.0, onnx 1.14.0): "), message
    assert "onnxruntime" not in message and "numpy" not in message  # only the versions that differ


def test_a_known_bug_gone_on_the_stack_it_was_recorded_on_is_convsmiths_own_failure(sin_case: CaseData) -> None:
    result = _replayed(sin_case, CONVERTERS["torch-onnx-script"])
    assert result.outcome is Outcome.FIXED and not stack_differences(sin_case.versions)
    with pytest.raises(pytest.fail.Exception, match="on the stack it was recorded on .*convsmith itself broke"):
        judge_known_bug(sin_case, result)


def test_a_known_bug_that_fails_differently_is_a_failure(sin_case: CaseData) -> None:
    other = dataclasses.replace(sin_case, signature="wrong_values-planted-sin-exporter-elsewhere")
    result = _replayed(other, SinAsCosExporter())
    assert result.outcome is Outcome.DIFFERENT
    with pytest.raises(AssertionError, match="update or re-promote"):
        judge_known_bug(other, result)


REPORT_LINES = 80


@pytest.mark.parametrize("folder", [pytest.param(p.parent, id=p.parent.name[:80])
                                    for p in sorted(CORPUS.glob("*/case.json"))])
def test_corpus_report_says_whose_bug_in_few_lines(folder: Path) -> None:
    """Every corpus case is diagnosed, and its report.md names each cross-check's outcome in at most 80 lines."""
    case = read_case(folder)
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert case.cross_checks, f"{folder.name}: not diagnosed (fuzzer.diagnosis.whose_bug.with_diagnosis)"
    assert len(report.splitlines()) <= REPORT_LINES
    section = report.split("## Cross-checks\n", 1)[1].split("\n## ", 1)[0]
    for check in case.cross_checks:
        assert (check.group or check.name.rsplit(" ", 1)[0]) in section and check.outcome in section, check.name
