"""The operator registry: every family module's OPS, collected once at import into an immutable table."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from generators.ops.base import OpSpec

FAMILIES: tuple[str, ...] = (
    "unary",
    "binary",
    "compare",
    "cast",
    "reduce",
    "linalg",
    "conv",
    "pool",
    "norm",
    "activation",
    "shape",
    "index",
    "resize",
    "bitwise",
)


class OpRegistry(Mapping[str, OpSpec]):
    """Operator specs by name; built once, never mutated."""

    def __init__(self, ops: list[OpSpec]) -> None:
        table: dict[str, OpSpec] = {}
        for op in ops:
            if op.name in table:
                raise ValueError(f"operator {op.name!r} is registered twice")
            table[op.name] = op
        self._table = dict(sorted(table.items()))

    def __getitem__(self, name: str) -> OpSpec:
        return self._table[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def select(self, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> list[OpSpec]:
        """Ops named in `include` (all when empty) minus `exclude`; unknown names raise KeyError."""
        for name in include + exclude:
            if name not in self._table:
                raise KeyError(f"unknown operator {name!r}")
        names = include or tuple(self._table)
        return [self._table[n] for n in names if n not in exclude]


def _load() -> OpRegistry:
    ops: list[OpSpec] = []
    for family in FAMILIES:
        try:
            module = importlib.import_module(f"generators.ops.{family}")
        except ModuleNotFoundError as exc:
            if exc.name != f"generators.ops.{family}":
                raise
            continue
        ops.extend(cls() for cls in module.OPS)
    return OpRegistry(ops)


REGISTRY: OpRegistry = _load()
