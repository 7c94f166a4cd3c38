"""Seeded coins (fuzzer/support/chance.py): fixed by their key, spread evenly over [0, 1)."""

from __future__ import annotations

from fuzzer.support.chance import seeded_chance


def test_a_key_always_draws_the_same_number_and_keys_spread_evenly() -> None:
    draws = [seeded_chance(f"demote:{seed}:conv2d:float32") for seed in range(10_000)]
    assert draws == [seeded_chance(f"demote:{seed}:conv2d:float32") for seed in range(10_000)]
    assert all(0.0 <= d < 1.0 for d in draws)
    deciles = [sum(1 for d in draws if k / 10 <= d < (k + 1) / 10) for k in range(10)]
    assert all(900 <= n <= 1100 for n in deciles), deciles
    assert seeded_chance("a") != seeded_chance("b")
