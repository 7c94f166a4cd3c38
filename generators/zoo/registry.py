"""The zoo's registry: the ENTRIES of every family module under generators/zoo, gathered once at import.

A family module is any module of generators.zoo that defines ENTRIES (a list of ZooEntry classes): adding an
architecture is one class in one family module. Listing the registry imports no optional library.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator, Mapping
from types import ModuleType

import generators.zoo
from generators.zoo.entry import ZooEntry
from generators.zoo.spec import Family, Framework


class ZooRegistry(Mapping[str, ZooEntry]):
    """Zoo entries by name, in name order; built once, never mutated."""

    def __init__(self, entries: Iterable[ZooEntry]) -> None:
        table: dict[str, ZooEntry] = {}
        for entry in entries:
            if entry.name in table:
                raise ValueError(f"zoo entry {entry.name!r} is registered twice")
            table[entry.name] = entry
        self._table = dict(sorted(table.items()))

    @classmethod
    def from_modules(cls, modules: Iterable[ModuleType]) -> ZooRegistry:
        """One instance of every class in the ENTRIES list of each module."""
        return cls(entry_class() for module in modules for entry_class in module.ENTRIES)

    def __getitem__(self, name: str) -> ZooEntry:
        return self._table[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    @property
    def families(self) -> tuple[Family, ...]:
        return tuple(sorted({e.family for e in self._table.values()}, key=lambda f: f.value))

    def select(self, family: Family | None = None, framework: Framework | None = None) -> list[ZooEntry]:
        """The entries of `family` and `framework` (each: any when None), in name order."""
        return [e for e in self._table.values()
                if family in (None, e.family) and framework in (None, e.framework)]


def family_modules() -> list[ModuleType]:
    """Every module of generators.zoo that defines ENTRIES, in name order."""
    modules = (importlib.import_module(f"generators.zoo.{info.name}")
               for info in pkgutil.iter_modules(generators.zoo.__path__))
    return [m for m in modules if hasattr(m, "ENTRIES")]


ZOO: ZooRegistry = ZooRegistry.from_modules(family_modules())
