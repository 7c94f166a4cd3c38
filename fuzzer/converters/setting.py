"""The settings a user of a converter could change to avoid one of its bugs until it is fixed: each says what it is,
how convsmith re-runs the case under it (a registry converter and its options, and the ONNX Runtime level the target
runs at) and the line the user writes. Each converter lists its own (`capabilities.AvoidsBugs`), cheapest first;
fuzzer/diagnosis/workaround.py tries them on a reduced case."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fuzzer.converters.culprit import Culprit
from fuzzer.converters.ort_levels import LEVELS, ORT_LEVEL_MEMBERS


@dataclass(frozen=True)
class Setting:
    """One setting to try: a one-line description, the converter (registry name) and options the re-run uses, the
    ONNX Runtime level its target model runs at ("" for the converter's own), and the code line a user writes."""

    description: str  # "the other exporter: torch-onnx-dynamo"
    converter: str
    options: Mapping[str, Any]
    code: str  # 'torch.onnx.export(module, inputs, "model.onnx", dynamo=True, opset_version=18)'
    level: str = ""

    def __post_init__(self) -> None:
        if self.level and self.level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {self.level!r}")


@dataclass(frozen=True)
class Hints:
    """What a case says about its bug that orders or narrows a converter's settings: whether it is a divergence,
    the rewrites named behind it (the passes that show it alone, a bisection's transformer), whether the blame is on
    ONNX Runtime's kernel (the exported model is right), the opset from which ONNX takes the type its schema error
    names (0: none named)."""

    divergence: bool = False
    culprits: tuple[Culprit, ...] = ()
    kernel: bool = False
    type_opset: int = 0


def session_level_code(level: str) -> str:
    """The line that sets an ONNX Runtime session's optimization level."""
    return f"sess_options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.{ORT_LEVEL_MEMBERS[level]}"


def nearest_opsets(opset: int, low: int, high: int, count: int = 2) -> tuple[int, ...]:
    """The `count` opsets nearest `opset` within [low, high], the newer one first on a tie (17 -> 18, 16)."""
    others = [o for o in range(low, high + 1) if o != opset]
    return tuple(sorted(others, key=lambda o: (abs(o - opset), -o))[:count])

