"""The recorder tells novelty (novelty.py, spread.py) what each test's converter was given and what its hits named."""

from __future__ import annotations

from pathlib import Path

from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.policy.culprit_cut import CULPRIT_AVOIDED, CULPRIT_CUT, CULPRIT_GUESSED
from fuzzer.campaign.policy.novelty import Novelty
from fuzzer.campaign.policy.settings import SKIPPED
from fuzzer.campaign.policy.traits import TRAIT
from fuzzer.campaign.recorder import Recorder
from fuzzer.campaign.result import TestResult


def _recorder(tmp_path: Path) -> Recorder:
    recorder = Recorder(CampaignDB(tmp_path / "campaign.db", create=True), tmp_path, demote_known=True)
    recorder.start(1)
    return recorder


def test_the_operators_cut_out_before_a_converter_ran_are_not_counted_as_tested(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path)
    pairs = [("isinf", "float32"), ("relu", "float32"), ("add", "float16")]
    recorder.db.add_unit(0, 10)
    hit = TestResult(0, 10, "onnx2tf", "crash", "node_conversion", "sig-a", True, (f"{CULPRIT_AVOIDED}:isinf",))
    assert recorder.test(hit, pairs, True)
    spread = recorder.novelty.spread
    assert spread.held["onnx2tf"] == {"relu": 1, "add": 1}
    assert spread.samples["sig-a"] == ("onnx2tf", [frozenset({"relu", "add"})])


def test_a_guessed_cut_keeps_the_filed_hit_as_one_that_named_no_culprit(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path)
    pairs = [("isfinite", "float32"), ("relu", "float32")]
    recorder.db.add_unit(0, 10)
    passed = TestResult(0, 10, "onnx2tf", "pass", "none", labels=(f"{CULPRIT_GUESSED}:isfinite",),
                        cut_from="sig-isinf")
    recorder.test(passed, pairs, True)
    novelty = recorder.novelty
    assert novelty.hits == {"sig-isinf": 1} and novelty.localized == set() and novelty.culprits == {}
    assert novelty.spread.samples["sig-isinf"] == ("onnx2tf", [frozenset({"isfinite", "relu"})])


def test_a_graph_that_meets_the_filed_bug_again_past_the_cut_is_one_hit(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path)
    recorder.db.add_unit(0, 10)
    again = TestResult(0, 10, "onnx2tf", "crash", "node_conversion", "sig-isinf", True,
                       (f"{CULPRIT_GUESSED}:isfinite",), cut_from="sig-isinf")
    recorder.test(again, [("isfinite", "float32"), ("nan_to_num", "float32")], True)
    assert recorder.novelty.hits == {"sig-isinf": 1}
    assert len(recorder.novelty.spread.samples["sig-isinf"][1]) == 1


def test_only_the_tests_that_ran_their_converter_count_in_the_base_rates(tmp_path: Path) -> None:
    """A test skipped as known unsupported or for a known root cause could not hit a bug: counting it would make a
    trait look common among passing tests (spread.MIN_TRAIT_PRECISION). Traits are counted under their tokens."""
    recorder = _recorder(tmp_path)
    pairs = [("relu", "bfloat16"), (TRAIT, "input:bfloat16")]
    for idx, (symptom, stage, labels) in enumerate([("pass", "none", ()),
                                                    ("unsupported", "source", ("skipped-known-unsupported",)),
                                                    ("unsupported", "source", (SKIPPED,))]):
        recorder.db.add_unit(idx, 10 + idx)
        recorder.test(TestResult(idx, 10 + idx, "onnx2tf", symptom, stage, labels=labels), pairs, True)
    spread = recorder.novelty.spread
    assert spread.tests == {"onnx2tf": 1} and spread.held["onnx2tf"] == {"relu": 1, "trait:input:bfloat16": 1}


def test_a_tests_own_traits_count_beside_its_graphs_in_the_base_rates_and_the_samples(tmp_path: Path) -> None:
    """The traits a worker read off the model an ONNX tool was given (TestResult.traits) are counted like the
    graph's: what a trait cover of such a bug is weighed on."""
    recorder = _recorder(tmp_path)
    pairs = [("relu", "float32"), (TRAIT, "input:float32")]
    recorder.db.add_unit(0, 10)
    hit = TestResult(0, 10, "onnx2tf", "crash", "node_conversion", "sig-const", True,
                     traits=("constant-output", "keras/constant-output"))
    recorder.test(hit, pairs, True)
    spread = recorder.novelty.spread
    tokens = {"relu", "trait:input:float32", "trait:constant-output", "trait:keras/constant-output"}
    assert spread.held["onnx2tf"] == dict.fromkeys(tokens, 1)
    assert spread.samples["sig-const"] == ("onnx2tf", [frozenset(tokens)])


def test_a_culprit_its_bug_outlived_being_cut_out_of_is_refuted_and_the_hits_are_sampled_whole(
        tmp_path: Path) -> None:
    """onnx2tf's bfloat16-input bug was reduced to a graph with one unsqueeze pair: taken for the culprit, it was cut
    out, and the bug came back. From then on its hits name no culprit, so a trait can cover them."""
    recorder = _recorder(tmp_path)
    pairs = [("pattern_unsqueeze_pair", "bfloat16"), ("relu", "float32"), (TRAIT, "input:bfloat16")]
    for idx in range(2):  # two hits that name the reduced case's operator: localized, cut out for onnx2tf
        recorder.db.add_unit(idx, 10 + idx)
        recorder.test(TestResult(idx, 10 + idx, "onnx2tf", "crash", "node_conversion", "sig-quint16", True,
                                 culprit="pattern_unsqueeze_pair"), pairs, True)
    novelty = recorder.novelty
    assert novelty.avoided() == [("onnx2tf", "pattern_unsqueeze_pair")] and "sig-quint16" not in novelty.spread.samples
    recorder.db.add_unit(2, 12)
    again = TestResult(2, 12, "onnx2tf", "crash", "node_conversion", "sig-quint16", True,
                       (f"{CULPRIT_CUT}:pattern_unsqueeze_pair",), cut_from="sig-quint16")
    recorder.test(again, pairs, True)
    assert novelty.refuted == {("sig-quint16", "onnx2tf", "pattern_unsqueeze_pair")}
    assert novelty.avoided() == [] and novelty.localized == set() and novelty.culprits == {}
    recorder.db.add_unit(3, 13)
    recorder.test(TestResult(3, 13, "onnx2tf", "crash", "node_conversion", "sig-quint16", True,
                             culprit="pattern_unsqueeze_pair"), pairs, True)
    assert novelty.localized == set() and novelty.hits["sig-quint16"] == 4
    whole = frozenset({"pattern_unsqueeze_pair", "relu", "trait:input:bfloat16"})
    assert novelty.spread.samples["sig-quint16"] == ("onnx2tf", [whole, whole])
    assert Novelty.from_tally(novelty.tally()).refuted == novelty.refuted
