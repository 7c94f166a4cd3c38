"""The operator-sequence analysis ranks a planted pair first, and its Fisher test is exact."""

from __future__ import annotations

import math
import random

import hand_graphs

from oracles.sequences import enrichment, fisher_greater, graph_sequences


def test_graph_sequences_are_pairs_and_paths_of_three() -> None:
    seqs = graph_sequences(hand_graphs.conv_relu_add())
    assert seqs == {"conv2d > relu", "relu > add", "conv2d > relu > add"}


def test_fisher_matches_the_textbook_tea_tasting_table() -> None:
    # Fisher's lady tasting tea: 3 of 4 cups right; one-sided p = 17/70.
    assert abs(fisher_greater(3, 1, 1, 3) - 17 / 70) < 1e-12


def _fisher_by_integers(a: int, b: int, c: int, d: int) -> float:
    row, col, total = a + b, a + c, a + b + c + d
    return sum(math.comb(row, k) * math.comb(total - row, col - k) for k in range(a, min(row, col) + 1)) \
        / math.comb(total, col)


def test_fisher_agrees_with_the_sum_of_binomial_coefficients_on_random_tables() -> None:
    rng = random.Random(3)
    for _ in range(500):
        table = [rng.randint(0, 60) for _ in range(4)]
        assert math.isclose(fisher_greater(*table), _fisher_by_integers(*table), rel_tol=1e-9, abs_tol=1e-12), table


def test_fisher_on_a_weeks_tables_is_one_above_the_expected_count_and_tiny_far_below_it() -> None:
    assert fisher_greater(10, 500_000, 2_000_000, 1_000) == 1.0  # 10 of 2M failing graphs: far fewer than expected
    assert fisher_greater(5_000, 10_000, 10_000, 1_000_000) == 0.0  # a third of failing graphs, 1% of passing ones


def test_a_planted_pair_is_ranked_first() -> None:
    rng = random.Random(7)
    ops = ["add", "mul", "relu", "tanh", "exp", "sub", "abs", "neg"]
    graphs = []
    for _ in range(400):
        seqs = {f"{rng.choice(ops)} > {rng.choice(ops)}" for _ in range(4)}
        planted = rng.random() < 0.15
        if planted:
            seqs.add("cumsum > roll")
        failed = rng.random() < (0.9 if planted else 0.2)
        graphs.append((seqs, failed))
    rows = enrichment(graphs)
    assert rows[0].sequence == "cumsum > roll"
    assert rows[0].p_value < 1e-6 and rows[0].failing > rows[0].passing
