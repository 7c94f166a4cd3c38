"""The operator registry: the OPS of every family module under generators/ops, collected once at import.

A family module is any module of generators.ops that defines OPS (a list of OpSpec classes), so adding an
operator is one class in one family module, and adding a family is one new module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator, Mapping
from types import ModuleType

import generators.ops
from generators.ir import Graph
from generators.ops.base import OpSpec


class OpRegistry(Mapping[str, OpSpec]):
    """Operator specs by name; built once, never mutated. Equal only to itself (it keys generator caches)."""

    def __init__(self, ops: Iterable[OpSpec]) -> None:
        table: dict[str, OpSpec] = {}
        for op in ops:
            if op.name in table:
                raise ValueError(f"operator {op.name!r} is registered twice")
            table[op.name] = op
        self._table = dict(sorted(table.items()))

    @classmethod
    def from_modules(cls, modules: Iterable[ModuleType]) -> OpRegistry:
        """One instance of every class in the OPS list of each module."""
        return cls(op_class() for module in modules for op_class in module.OPS)

    def features(self, graph: Graph) -> set[str]:
        """The features (OpSpec.features) the nodes of `graph` ask of a converter."""
        out: set[str] = set()
        for node in graph.nodes:
            op = self._table[node.op]
            out.update(op.features(node.attrs, [graph.types[name].rank for name in node.inputs[:op.arity]]))
        return out

    def __getitem__(self, name: str) -> OpSpec:
        return self._table[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({op.family for op in self._table.values()}))

    def select(self, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> list[OpSpec]:
        """Ops named in `include` (all when empty) minus `exclude`; unknown names raise KeyError."""
        for name in include + exclude:
            if name not in self._table:
                raise KeyError(f"unknown operator {name!r}")
        names = include or tuple(self._table)
        return [self._table[n] for n in names if n not in exclude]


def family_modules() -> list[ModuleType]:
    """Every module of generators.ops that defines OPS, in name order."""
    modules = (importlib.import_module(f"generators.ops.{info.name}")
               for info in pkgutil.iter_modules(generators.ops.__path__))
    return [m for m in modules if hasattr(m, "OPS")]


REGISTRY: OpRegistry = OpRegistry.from_modules(family_modules())
