"""A campaign generates less of the (operator, dtype) pairs behind a bug it has already hit often."""

from __future__ import annotations

from fuzzer.campaign.novelty import AVOID_PROBABILITY, HITS_TO_DEMOTE, Novelty, without_demoted
from generators.generator import GenOptions, generate


def test_a_signature_hit_often_demotes_the_pairs_every_hitting_graph_held() -> None:
    novelty = Novelty()
    for k in range(HITS_TO_DEMOTE - 1):
        novelty.record("sig-a", [("roll", "bool"), ("add", "float32"), (f"op{k}", "int8")])
    assert novelty.demoted() == []  # not yet hit often enough
    novelty.record("sig-a", [("roll", "bool"), ("mul", "float32")])
    assert novelty.demoted() == [("roll", "bool")]


def test_a_signature_whose_graphs_share_many_pairs_names_no_culprit() -> None:
    novelty = Novelty()
    common = [(f"op{k}", "float32") for k in range(5)]
    for _ in range(HITS_TO_DEMOTE + 2):
        novelty.record("sig-b", common)
    novelty.record("sig-c", [])
    assert novelty.demoted() == []


def test_a_demoted_pair_is_left_out_of_most_graphs_and_kept_in_some() -> None:
    pair = ("relu", "float32")
    options = GenOptions(nodes=3, include_ops=("relu", "add", "mul"))
    kept = [seed for seed in range(300) if pair not in without_demoted(options, seed, [pair]).avoid_pairs]
    assert abs(len(kept) / 300 - (1 - AVOID_PROBABILITY)) < 0.06
    assert kept == [seed for seed in range(300) if pair not in without_demoted(options, seed, [pair]).avoid_pairs]
    avoided = next(seed for seed in range(300) if seed not in kept)
    graph = generate(avoided, without_demoted(options, avoided, [pair]))
    assert all(not (n.op == "relu" and graph.types[n.inputs[0]].dtype.value == "float32") for n in graph.nodes)
    assert without_demoted(options, 5, []) is options
