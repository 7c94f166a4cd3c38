"""A case reproduces only where its repro.py, run in a fresh process, shows its bug: the reducer records that replay in
the reduced case's case.json, and triage's `reproduces` flag (a root cause's representative_reproduces) reads it
and nothing else.

`PlantedInProcessOnly` is a registry entry planted for the test: in convsmith's check it writes every Sin as Cos (as
test_new_converter's PlantedExporter does), but its repro.py exports without the fault, as a bug that needs the state
of a long-lived process would replay. PlantedExporter, whose repro.py plants the fault too, is the control."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_new_converter import PlantedExporter

from fuzzer.cases.case import case_from_result, case_log, collect_versions
from fuzzer.cases.case_json import CASE_JSON, REPLAY_KEY, case_reproduces
from fuzzer.cases.folder import write_case
from fuzzer.cases.fresh_replay import FreshReplay
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.describe import Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.options import ConverterOptions
from fuzzer.reduce.case import reduce_case
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker
from fuzzer.triage.model import Finding, RootCauseGroup
from generators.builder import GraphBuilder
from generators.ir import Graph
from oracles.verdict import Symptom


class PlantedInProcessOnly(PlantedExporter):
    """PlantedExporter whose repro.py exports as the TorchScript exporter does, without the planted fault."""

    name = "planted-in-process-only"

    def snippet(self, options: ConverterOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        planted = super().snippet(options, dynamic)
        return Snippet(planted.imports, planted.lines[:3], from_torch=True)


REGISTRY = ConverterRegistry([PlantedInProcessOnly(), PlantedExporter()])


def sin_exp() -> Graph:
    """x[3,4] -> sin -> exp: two operators, so the reducer has one to take away."""
    b = GraphBuilder()
    return b.build((b.op("exp", (b.op("sin", (b.input((3, 4)),), (3, 4)),), (3, 4)),))


def reduced_case(converter: PlantedExporter, tmp_path: Path) -> tuple[Path, Path]:
    """The case `converter` files for sin_exp() (wrong values, in convsmith's check) and its reduced case."""
    graph = sin_exp()
    result = check_prepared(prepare(graph, 3, {}, 1.0), converter)
    assert result.verdict.symptom is Symptom.WRONG_VALUES
    case = case_from_result(result, graph, 3, converter.name, collect_versions(converter.distributions),
                            log=case_log(result))
    folder = write_case(tmp_path, case, converter=converter)
    with IsolatedChecker(CheckerConfig(registry="test_fresh_replay:REGISTRY")) as checker:
        reduction = reduce_case(case, folder, checker, budget_s=30.0, shape_only=True)
    return folder, reduction.path


@pytest.mark.slow
@pytest.mark.parametrize("converter, exit_status, flag", [(PlantedInProcessOnly(), 0, False),
                                                          (PlantedExporter(), 1, True)],
                         ids=["in-process-only", "repro-shows-it"])
def test_reproduces_is_what_a_fresh_replay_of_repro_py_recorded(converter: PlantedExporter, exit_status: int,
                                                               flag: bool, tmp_path: Path) -> None:
    folder, reduced = reduced_case(converter, tmp_path)
    record = json.loads((reduced / CASE_JSON).read_text())[REPLAY_KEY]
    assert (record["command"], record["exit_status"], record["reproduces"]) == ("python repro.py", exit_status, flag)
    assert case_reproduces(folder, reduced) is flag
    assert case_reproduces(folder, folder) is None  # the case as filed was never replayed: unknown


def _finding(signature: str, reproduces: bool | None) -> Finding:
    return Finding(signature, "c", "node_conversion", "crash", "RuntimeError: x", None, ("sin",), 0, 1, 0.0,
                   case_dir=signature, reduced=True, nodes=1, reproduces=reproduces)


def test_representative_reproduces_is_true_only_from_a_replay() -> None:
    group = RootCauseGroup(_finding("a", None).root_cause, (_finding("a", None), _finding("b", False)))
    assert (group.representative.signature, group.to_json()["representative_reproduces"]) == ("a", None)
    replayed = RootCauseGroup(group.cause, (*group.findings, _finding("c", True)))
    assert (replayed.representative.signature, replayed.to_json()["representative_reproduces"]) == ("c", True)


def test_a_replay_that_cannot_tell_records_no_outcome() -> None:
    outcomes = {status: FreshReplay(status, 1.0).reproduces for status in (0, 1, 2, 3, 4, None)}
    assert outcomes == {0: False, 1: True, 2: None, 3: None, 4: False, None: None}
