"""ONNX Runtime's graph optimization levels by the names convsmith gives them, lowest first, each with the
`onnxruntime.GraphOptimizationLevel` member it stands for (its name: this module imports no onnxruntime, and a
generated snippet spells it)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

ORT_LEVEL_MEMBERS: Mapping[str, str] = MappingProxyType({
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
})
LEVELS: tuple[str, ...] = tuple(ORT_LEVEL_MEMBERS)
# The levels that rewrite the graph: "disabled" is the reference each of them is judged against.
OPTIMIZING_LEVELS: tuple[str, ...] = LEVELS[1:]
