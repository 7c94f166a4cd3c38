"""A campaign generates less of the (operator, dtype) pairs behind a bug it has already hit often."""

from __future__ import annotations

import json

from fuzzer.campaign.policy.novelty import (
    AVOID_FOR,
    AVOID_PROBABILITY,
    AVOID_PROBABILITY_CULPRIT,
    AVOID_PROBABILITY_LOST,
    FEATURE,
    HITS_TO_DEMOTE,
    HITS_TO_DEMOTE_LOCALIZED,
    HITS_TO_DEMOTE_LOST,
    MAX_CULPRIT_PAIRS,
    Novelty,
    without_demoted,
)
from generators.generator import GenOptions, generate

# Seeds over which a share of graphs is counted, and how far (in standard deviations of a binomial count) it may
# stray from its probability: a uniform draw passes whatever its seeds, a wrong probability does not.
SEEDS = 2000
SIGMAS = 4.5


def assert_share(count: int, probability: float) -> None:
    """`count` of SEEDS graphs is what `probability` gives, within SIGMAS standard deviations."""
    spread = SIGMAS * (probability * (1 - probability) / SEEDS) ** 0.5
    assert abs(count / SEEDS - probability) <= spread, (count, probability)


def test_a_signature_hit_often_demotes_the_pairs_every_hitting_graph_held() -> None:
    novelty = Novelty()
    for k in range(HITS_TO_DEMOTE - 1):
        novelty.record("sig-a", [("roll", "bool"), ("add", "float32"), (f"op{k}", "int8")])
    assert novelty.demoted() == []  # not yet hit often enough
    novelty.record("sig-a", [("roll", "bool"), ("mul", "float32")])
    assert novelty.demoted() == [("roll", "bool")]


def test_a_bug_filed_under_its_operator_is_demoted_after_fewer_hits_and_kept_across_a_resume() -> None:
    """Recorded with the pairs of the operator it names, a bug needs no intersection of many graphs: its second
    hit demotes the dtypes the hits held."""
    assert HITS_TO_DEMOTE_LOCALIZED < HITS_TO_DEMOTE
    novelty = Novelty()
    for _ in range(HITS_TO_DEMOTE_LOCALIZED - 1):
        novelty.record("sig-acos", [("acos", "float32")], localized=True)
    assert novelty.demoted() == []
    novelty.record("sig-acos", [("acos", "float64")], localized=True)
    assert novelty.demoted() == [("acos", "float32"), ("acos", "float64")]
    resumed = Novelty.from_tally(json.loads(json.dumps(novelty.tally())))
    assert resumed.mark("sig-acos") == HITS_TO_DEMOTE_LOCALIZED and resumed.demoted() == novelty.demoted()


def test_an_operator_that_fails_in_every_dtype_is_demoted_in_the_dtypes_that_hit() -> None:
    """No pair is common to the hits (one op, three dtypes): the operator they all held is the culprit; `add`, held
    by some hits only, is not."""
    novelty = Novelty()
    for k, dtype in enumerate(["float32", "float64", "bfloat16", "float32", "float64"]):
        add = [("add", "int8")] if k % 2 else []
        novelty.record("sig-pad", [("pad_circular", dtype), (f"op{k}", "float32"), *add])
    assert novelty.demoted() == [("pad_circular", "bfloat16"), ("pad_circular", "float32"),
                                 ("pad_circular", "float64")]


def test_a_signature_whose_graphs_share_many_pairs_names_no_culprit() -> None:
    novelty = Novelty()
    common = [(f"op{k}", "float32") for k in range(5)]
    for _ in range(HITS_TO_DEMOTE + 2):
        novelty.record("sig-b", common)
    novelty.record("sig-c", [])
    for k in range(HITS_TO_DEMOTE):  # no pair in common, and too many operators: no culprit either
        novelty.record("sig-d", [(f"op{j}", f"dtype{k}") for j in range(MAX_CULPRIT_PAIRS + 1)])
    assert novelty.demoted() == []


def test_a_demoted_pair_is_left_out_of_most_graphs_and_kept_in_some() -> None:
    """Each seed draws for itself, the same way every time; a demotion certain to apply leaves the pair out of the
    graph, one that never applies changes nothing."""
    pair = ("relu", "float32")
    options = GenOptions(nodes=3, include_ops=("relu", "add", "mul"))
    kept = [seed for seed in range(SEEDS) if pair not in without_demoted(options, seed, [pair]).demoted_pairs]
    assert_share(len(kept), 1 - AVOID_PROBABILITY)
    assert kept == [seed for seed in range(SEEDS) if pair not in without_demoted(options, seed, [pair]).demoted_pairs]
    avoided = without_demoted(options, 0, [(*pair, 1.0)])
    assert avoided.demoted_pairs == frozenset({pair})
    graph = generate(0, avoided)
    assert all(not (n.op == "relu" and graph.types[n.inputs[0]].dtype.value == "float32") for n in graph.nodes)
    assert without_demoted(options, 0, [(*pair, 0.0)]) is options
    assert without_demoted(options, 5, []) is options


def test_a_feature_that_several_operators_ask_for_is_named_alone() -> None:
    """A circular pad of two dims of a rank-3 tensor, by pad_circular or by an unbatched conv2d: no operator is
    common to the hits, the feature is, and a feature is never demoted through the operators that hold it."""
    feature = (FEATURE, "pad:circular:rank3:dims2")
    novelty = Novelty()
    for k, op in enumerate(["pad_circular", "conv2d", "pad_circular", "conv2d", "conv2d"]):
        novelty.record("sig-heap", [(op, "float32" if k % 2 else "float64"), feature, (FEATURE, f"pad:reflect:{k}")])
    assert novelty.demoted() == [feature]
    options = without_demoted(GenOptions(), 0, [(*feature, 1.0)])
    kept = without_demoted(GenOptions(), 0, [(*feature, 0.0)])
    assert (options.avoid_features, options.demoted_pairs) == (frozenset({feature[1]}), frozenset())
    assert (kept.avoid_features, kept.demoted_pairs) == (frozenset(), frozenset())


def test_a_resumed_campaign_goes_on_counting_where_it_stopped() -> None:
    before = Novelty()
    for k in range(HITS_TO_DEMOTE - 1):
        before.record("sig-a", [("roll", "bool"), (f"op{k}", "int8")])
    after = Novelty.from_tally(json.loads(json.dumps(before.tally())), earlier=[("sin", "float16")])
    assert after.demoted() == [("sin", "float16")]
    after.record("sig-a", [("roll", "bool")])
    assert after.demoted() == [("roll", "bool"), ("sin", "float16")]
    assert Novelty.from_tally(None).tally() == Novelty().tally()


def test_a_bug_that_kills_its_worker_is_demoted_after_fewer_hits() -> None:
    novelty = Novelty()
    for _ in range(HITS_TO_DEMOTE_LOST):
        novelty.record("sig-death", [("pad_circular", "float32")], lost_worker=True)
        novelty.record("sig-wrong", [("roll", "bool")])
    assert HITS_TO_DEMOTE_LOST < HITS_TO_DEMOTE
    assert novelty.demoted() == [("pad_circular", "float32")]
    resumed = Novelty.from_tally(json.loads(json.dumps(novelty.tally())))
    for _ in range(HITS_TO_DEMOTE - HITS_TO_DEMOTE_LOST):
        resumed.record("sig-wrong", [("roll", "bool")])
    assert resumed.demoted() == [("pad_circular", "float32"), ("roll", "bool")]


def test_the_culprit_of_a_worker_death_is_left_out_of_more_graphs() -> None:
    novelty = Novelty()
    for _ in range(HITS_TO_DEMOTE_LOST):
        novelty.record("sig-death", [("pad_circular", "float32")], lost_worker=True)
    for _ in range(HITS_TO_DEMOTE):
        novelty.record("sig-wrong", [("roll", "bool")])
    assert novelty.demotions() == [("pad_circular", "float32", AVOID_PROBABILITY_LOST),
                                   ("roll", "bool", AVOID_PROBABILITY)]
    demotions = json.loads(json.dumps(novelty.demotions()))  # as a unit message carries them
    left_out = {pair: sum(pair in without_demoted(GenOptions(), seed, demotions).demoted_pairs for seed in range(SEEDS))
                for pair in (("pad_circular", "float32"), ("roll", "bool"))}
    assert_share(left_out[("pad_circular", "float32")], AVOID_PROBABILITY_LOST)
    assert_share(left_out[("roll", "bool")], AVOID_PROBABILITY)


def test_a_localized_bug_is_cut_out_for_its_own_converter_and_the_rest_generate_it_as_before() -> None:
    novelty = Novelty()
    novelty.record("sig-conv1d", [("conv1d", "float32")], localized=True, culprit=("onnx2tf", "conv1d"))
    # Cut for its converter from the first hit; the generator's pairs, which every converter loses, wait for a second.
    assert novelty.avoided() == [("onnx2tf", "conv1d")] and novelty.demoted() == []
    novelty.record("sig-conv1d", [("conv1d", "float16")], localized=True, culprit=("onnx2tf", "conv1d"))
    novelty.record("sig-roll", [("roll", "bool"), ("add", "float32")])  # names no culprit operator: none to cut
    novelty.record("sig-roll", [("roll", "bool")])
    assert novelty.avoided() == [("onnx2tf", "conv1d")]
    assert (AVOID_FOR + "onnx2tf", "conv1d", AVOID_PROBABILITY_CULPRIT) in novelty.demotions()
    assert novelty.demoted() == [("conv1d", "float16"), ("conv1d", "float32")]  # the generator's pairs alone
    resumed = Novelty.from_tally(json.loads(json.dumps(novelty.tally())), novelty.demoted())
    assert resumed.demotions() == novelty.demotions()
    # The generator never reads a converter's avoided culprit as a pair to leave out.
    options = without_demoted(GenOptions(), 3, [(AVOID_FOR + "onnx2tf", "conv1d", 1.0)])
    assert options.demoted_pairs == GenOptions().demoted_pairs
