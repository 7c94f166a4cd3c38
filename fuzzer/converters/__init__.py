"""The converter registry: one module per converter, collected into an immutable table at import.

Converter modules import their library lazily, so importing this package never fails for a missing
library; `list_converters()` says which entries can run here and why not.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from fuzzer.converters.base import Converter, ConverterInfo
from fuzzer.converters.onnx_optimizer import OnnxOptimizer
from fuzzer.converters.onnx_simplifier import OnnxSim
from fuzzer.converters.onnx_slim import OnnxSlim
from fuzzer.converters.onnx_to_torch import OnnxToTorch
from fuzzer.converters.ort_optimizer import OrtOptimizer
from fuzzer.converters.torch_onnx_dynamo import TorchOnnxDynamo
from fuzzer.converters.torch_onnx_script import TorchOnnxScript
from fuzzer.converters.version_converter import OnnxVersionConverter


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


CONVERTERS = ConverterRegistry([
    TorchOnnxDynamo(), TorchOnnxScript(), OrtOptimizer(), OnnxSim(), OnnxSlim(), OnnxOptimizer(),
    OnnxVersionConverter(), OnnxToTorch(),
])


DEFAULT_REGISTRY = "fuzzer.converters:CONVERTERS"


def load_registry(ref: str) -> ConverterRegistry:
    """'module:attr' naming a ConverterRegistry (or a zero-argument callable returning one): how a child process
    finds the converters its parent runs (tests inject registries of deliberately faulty converters)."""
    module_name, _, attr = ref.partition(":")
    obj = getattr(importlib.import_module(module_name), attr or "CONVERTERS")
    registry = obj() if callable(obj) and not isinstance(obj, ConverterRegistry) else obj
    if not isinstance(registry, ConverterRegistry):
        raise TypeError(f"{ref} is not a ConverterRegistry")
    return registry


def list_converters() -> list[ConverterInfo]:
    """Every registered converter with its availability (and the reason when unavailable) and versions."""
    return [conv.info() for conv in CONVERTERS.values()]


def get_converter(name: str) -> Converter:
    return CONVERTERS[name]


__all__ = ["CONVERTERS", "DEFAULT_REGISTRY", "Converter", "ConverterInfo", "ConverterRegistry", "get_converter",
           "list_converters", "load_registry"]
