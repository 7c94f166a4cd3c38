"""The typed culprit: what a bisection or a cross-check names behind a bug, kept in case.json as a value, and read
back from the labels and sentences that case.json files written before it held."""

from __future__ import annotations

import json
from pathlib import Path

from fuzzer.cases.fault_site import case_culprits, fault_site
from fuzzer.cases.folder import read_case
from fuzzer.converters import CONVERTERS
from fuzzer.converters.culprit import Culprit, FoundBy, bisected, from_labels, from_sentence, named
from fuzzer.diagnosis.workaround import hints

CORPUS = Path(__file__).parent.parent / "corpus"
# Written before the culprit was a value: its all-level cross-check keeps the bisection as a sentence ("detail").
ORT_CRASH = CORPUS / "crash-ort-optimizer-graph_optimization-Fail-e83800d5cf55-reduced"
CONSTANT_FOLDING = Culprit("ort-optimizer", FoundBy.BISECTION, "ConstantFolding", "basic")


def test_a_culprit_round_trips_through_json_labels_and_its_sentence() -> None:
    assert Culprit.from_json(json.loads(json.dumps(CONSTANT_FOLDING.to_json()))) == CONSTANT_FOLDING
    assert CONSTANT_FOLDING.labels() == ("ort-level:basic", "ort-optimizer:ConstantFolding")
    assert from_labels("ort-optimizer", ("comparison_tie", *CONSTANT_FOLDING.labels())) == CONSTANT_FOLDING
    assert CONSTANT_FOLDING.sentence() == "lowest level showing it: basic; disabling ConstantFolding alone removes it"
    assert from_sentence("ort-optimizer", CONSTANT_FOLDING.sentence()) == CONSTANT_FOLDING
    level_only = Culprit("ort-optimizer", FoundBy.BISECTION, "", "extended")
    assert from_labels("ort-optimizer", level_only.labels()) == level_only
    assert from_sentence("ort-optimizer", level_only.sentence()) == level_only


def test_labels_and_text_that_name_no_culprit_read_as_none() -> None:
    assert from_labels("ort-optimizer", ("ort-optimizer:ConstantFolding",)) is None  # no level: no bisection ran
    assert from_labels("ort-optimizer", ("diverges-alone:1",)) is None
    assert from_sentence("ort-optimizer", "") is None
    assert from_sentence("ort-optimizer", "x alone shows it") is None


def test_named_and_bisected_pick_by_how_a_culprit_was_found() -> None:
    alone = (Culprit("onnxoptimizer", FoundBy.ALONE, "fuse_bn_into_conv"), Culprit("onnxoptimizer", FoundBy.ALONE, "b"))
    assert named((*alone, CONSTANT_FOLDING), FoundBy.ALONE) == ("fuse_bn_into_conv", "b")
    assert bisected((*alone, CONSTANT_FOLDING)) == CONSTANT_FOLDING and bisected(alone) is None


def test_a_case_written_with_the_sentence_still_names_its_transformer() -> None:
    """Saved before the culprit was typed: blame, workaround and the converter's component read the same value."""
    case = read_case(ORT_CRASH)
    assert [c.culprit for c in case.cross_checks if c.culprit] == [CONSTANT_FOLDING]
    assert case_culprits(case) == (CONSTANT_FOLDING,)
    assert hints(case).culprits == (CONSTANT_FOLDING,)
    component = CONVERTERS["ort-optimizer"].component(fault_site(case))
    assert component.name == "graph transformer `ConstantFolding`"
    rewritten = json.loads(json.dumps([c.to_json() for c in case.cross_checks]))
    assert rewritten[-1]["culprit"] == CONSTANT_FOLDING.to_json() and "detail" not in rewritten[-1]


def test_a_verdict_labelled_by_the_bisection_is_read_before_the_cross_checks() -> None:
    import dataclasses

    case = read_case(ORT_CRASH)
    labelled = dataclasses.replace(case, verdict=case.verdict.with_labels("ort-level:all", "ort-optimizer:GeluFusion"))
    assert case_culprits(labelled) == (Culprit("ort-optimizer", FoundBy.BISECTION, "GeluFusion", "all"),)
