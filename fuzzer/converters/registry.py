"""The converter registry's type and how a process finds one by reference ('module:attr'), apart from the table of
converters itself (fuzzer/converters/__init__.py): a converter module that needs the registry (the upstream exporters
an ONNX tool may start from) reads it through `default_registry`, at call time, never at import."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import ExportsUpstream
from fuzzer.converters.role import Role

DEFAULT_REGISTRY = "fuzzer.converters:CONVERTERS"


class ConverterRegistry(Mapping[str, Converter]):
    """Converters by name; built once, never mutated."""

    def __init__(self, converters: list[Converter]) -> None:
        table: dict[str, Converter] = {}
        for conv in converters:
            if conv.name in table:
                raise ValueError(f"converter {conv.name!r} is registered twice")
            table[conv.name] = conv
        self._table = table

    def __getitem__(self, name: str) -> Converter:
        if name not in self._table:
            raise KeyError(f"unknown converter {name!r}; known: {', '.join(self._table)}")
        return self._table[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def of_role(self, role: Role) -> tuple[Converter, ...]:
        """The converters of `role`, in registry order."""
        return tuple(c for c in self._table.values() if c.role is role)

    def upstreams(self) -> tuple[Converter, ...]:
        """The exporters whose export an ONNX tool can start from, in registry order."""
        return tuple(c for c in self._table.values() if c.role is Role.EXPORTER and isinstance(c, ExportsUpstream))


def load_registry(ref: str) -> ConverterRegistry:
    """'module:attr' naming a ConverterRegistry (or a zero-argument callable returning one): how a child process
    finds the converters its parent runs (tests inject registries of deliberately faulty converters)."""
    module_name, _, attr = ref.partition(":")
    obj = getattr(importlib.import_module(module_name), attr or "CONVERTERS")
    registry = obj() if callable(obj) and not isinstance(obj, ConverterRegistry) else obj
    if not isinstance(registry, ConverterRegistry):
        raise TypeError(f"{ref} is not a ConverterRegistry")
    return registry


def default_registry() -> ConverterRegistry:
    """CONVERTERS, read when called: the converter modules import this module before the table exists."""
    return load_registry(DEFAULT_REGISTRY)


__all__ = ["DEFAULT_REGISTRY", "ConverterRegistry", "default_registry", "load_registry"]
