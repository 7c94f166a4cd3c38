"""A bug whose hits name no culprit, spread over the graph operators that emit one ONNX operator, is cut out for its
converter by the few operators that cover its hits."""

from __future__ import annotations

import json

from fuzzer.campaign.policy.novelty import AVOID_FOR, AVOID_PROBABILITY_CULPRIT, HITS_TO_DEMOTE, Novelty
from fuzzer.campaign.policy.spread import MAX_COVER_OPS, MIN_SAMPLES, SAMPLES, SpreadTally, greedy_cover

FILLER = [f"op{k}" for k in range(40)]  # operators common in every converter's tests


def _background(novelty: Novelty, converter: str, tests: int = 200) -> None:
    """`tests` tests of `converter` on graphs of three filler operators each, and the IsInf emitters now and then."""
    for k in range(tests):
        ops = {FILLER[k % 40], FILLER[(k * 7) % 40], FILLER[(k * 13) % 40]}
        if k % 25 == 0:
            ops |= {"isinf", "isfinite", "nan_to_num"}
        novelty.seen(converter, [(op, "float32") for op in ops])


def _hit(novelty: Novelty, signature: str, converter: str, ops: list[str]) -> None:
    pairs = [(op, "float32") for op in ops]
    novelty.seen(converter, pairs)
    novelty.record(signature, pairs, culprit=(converter, ""))


def test_the_operators_behind_a_spread_bug_are_cut_out_for_its_converter_alone() -> None:
    novelty = Novelty()
    _background(novelty, "onnx2tf")
    emitters = ["isinf", "isfinite", "nan_to_num"]
    for k in range(MIN_SAMPLES + 1):  # each hit holds one emitter and fillers: no pair or operator is common
        _hit(novelty, "sig-isinf", "onnx2tf", [emitters[k % 3], FILLER[k], FILLER[k + 10]])
    assert novelty.demoted() == []  # nothing common to narrow the generator's pairs to
    assert novelty.avoided() == [("onnx2tf", "isfinite"), ("onnx2tf", "isinf"), ("onnx2tf", "nan_to_num")]
    assert (AVOID_FOR + "onnx2tf", "isinf", AVOID_PROBABILITY_CULPRIT) in novelty.demotions()
    resumed = Novelty.from_tally(json.loads(json.dumps(novelty.tally())))
    assert resumed.demotions() == novelty.demotions()


def test_a_spread_bug_gets_no_cover_before_enough_hits_are_sampled() -> None:
    novelty = Novelty()
    _background(novelty, "onnx2tf")
    for k in range(MIN_SAMPLES - 1):
        _hit(novelty, "sig-isinf", "onnx2tf", [["isinf", "isfinite"][k % 2], FILLER[k]])
    assert novelty.hits["sig-isinf"] >= HITS_TO_DEMOTE and novelty.avoided() == []


def test_hits_that_no_few_operators_cover_get_no_cover() -> None:
    """A bug of any of many operators (onnx2tf's failure after any reduction): cutting five or more is no remedy."""
    novelty = Novelty()
    _background(novelty, "onnx2tf")
    reductions = [f"reduce{k}" for k in range(MAX_COVER_OPS + 2)]
    for k in range(2 * len(reductions)):
        _hit(novelty, "sig-any-reduction", "onnx2tf", [reductions[k % len(reductions)], FILLER[k]])
    assert novelty.avoided() == []


def test_an_operator_as_common_in_all_tests_as_in_the_hits_is_no_culprit() -> None:
    spread = SpreadTally()
    for k in range(100):
        spread.seen("onnx2tf", ["add"] + (["isinf"] if k % 20 == 0 else []))
    for k in range(SAMPLES):  # `add` is in every hit, but also in every test; `isinf` is in half the hits only
        spread.sample("sig", "onnx2tf", ["add", "isinf"] if k % 2 else ["add", f"filler{k}"])
    assert spread.cover("sig") is None
    assert spread.samples["sig"][1][0] == frozenset({"add", "filler0"})
    assert not spread.sample("sig", "onnx2tf", ["isinf"])  # the sample is full: later hits are not kept


def test_the_greedy_cover_takes_the_operator_that_covers_most_and_may_leave_a_stray_hit_out() -> None:
    hits = [frozenset(ops) for ops in (["a", "x"], ["a", "y"], ["a"], ["b"], ["b", "x"], ["a"], ["b"], ["a"],
                                       ["b"], ["a"], ["stray"])]
    assert greedy_cover(hits, ["a", "b", "x"]) == frozenset({"a", "b"})  # 10 of 11: the stray one is spared
    assert greedy_cover(hits[:5], ["a", "x"]) == frozenset()  # `b` is no candidate: two hits stay uncovered


def test_of_two_tokens_that_cover_the_same_hits_the_one_fewer_tests_hold_is_taken() -> None:
    """onnx2tf's quint16 bug: every hit has a bfloat16 input in the graph and in the model it is given; the model's
    trait, which fewer tests hold (the exporter drops the input's type in some), skips fewer tests that would pass."""
    graph, model = "trait:input:bfloat16", "trait:model-input:bfloat16"
    hits = [frozenset({graph, model, f"op{k}"}) for k in range(6)]
    assert greedy_cover(hits, [graph, model]) == {graph}  # no base rates: the first by name
    assert greedy_cover(hits, [graph, model], {graph: 40, model: 25}) == {model}
