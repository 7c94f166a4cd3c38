"""The stack under test: each library the converters run, its locked version and the one installed here.

The libraries are read off the registry (each converter's `distributions`) plus the few every converter runs on
(COMMON); the versions come from the lock (`fuzzer.support.lock`) and from this interpreter's installed metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.support.lock import agrees, canonical, installed_version

# Beneath every converter: their releases change what a converter's model computes (numpy, protobuf, ml_dtypes for
# tensors and serialization) or how the dynamo exporter builds it (onnx-ir, onnxscript's IR).
COMMON: tuple[str, ...] = ("numpy", "protobuf", "ml-dtypes", "onnx-ir")


@dataclass(frozen=True)
class StackRow:
    """One library: its locked version (None when the lock lacks it) and the installed one (None when absent)."""

    library: str
    locked: str | None
    installed: str | None

    @property
    def agrees(self) -> bool:
        return self.locked is not None and agrees(self.locked, self.installed)

    def describe(self) -> str:
        """'torch: locked 2.13.0, installed 2.14.1', for a mismatch message."""
        return f"{self.library}: locked {self.locked or 'nothing'}, installed {self.installed or 'nothing'}"


def libraries_under_test(registry: ConverterRegistry = CONVERTERS) -> tuple[str, ...]:
    """Canonical names of every registered converter's distributions, in registry order, then COMMON."""
    names = [canonical(d) for conv in registry.values() for d in conv.distributions]
    return tuple(dict.fromkeys([*names, *COMMON]))


def stack_rows(lock: Mapping[str, str], libraries: tuple[str, ...]) -> list[StackRow]:
    """Locked against installed, one row per library."""
    return [StackRow(name, lock.get(canonical(name)), installed_version(name)) for name in libraries]


def mismatches(rows: list[StackRow]) -> list[str]:
    """A line for each row whose installed version is not the locked one (or that the lock lacks)."""
    return [row.describe() for row in rows if not row.agrees]
