"""Lifting a concrete graph back to z3 (generators/symbolic.py): a replay is accepted where its constraints hold at
the recorded shapes, decided by simplifying where that settles it and by a solver where it does not."""

from __future__ import annotations

import z3

from generators import symbolic
from generators.generator import GenOptions, generate
from generators.solver import fresh_z3_context


def test_bindings_to_numbers_settle_a_replays_constraints_without_a_solver() -> None:
    with fresh_z3_context():
        x, k, free = z3.Int("x"), z3.Int("k"), z3.Int("free")
        shape = [(x, z3.IntVal(6))]
        assert symbolic._decided([k == 3, x == 2 * k, k >= 1], shape) is True
        assert symbolic._decided([3 == k, x == 2 * k + 1], shape) is False
        assert symbolic._decided([k == 3, k == 4], []) is False
        assert symbolic._decided([], shape) is True
        assert symbolic._decided([free >= 1, x == 6], shape) is None  # `free` is bound by no equation


def test_lifting_decides_each_replay_as_a_solver_would(monkeypatch) -> None:
    graphs = [generate(seed, GenOptions(nodes=5)) for seed in range(25)]
    with fresh_z3_context():
        fast = [(str(lifted.constraints), lifted.pinned) for lifted in map(symbolic.lift, graphs)]
    monkeypatch.setattr(symbolic, "_decided", lambda terms, pairs: None)  # every replay goes to the solver
    with fresh_z3_context():
        solved = [(str(lifted.constraints), lifted.pinned) for lifted in map(symbolic.lift, graphs)]
    assert fast == solved
