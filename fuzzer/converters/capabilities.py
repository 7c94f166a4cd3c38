"""What a converter can do beyond converting, each a small Protocol it opts into by defining the members: the rest of
convsmith asks `isinstance(converter, Capability)` and reads the answer, never a converter's name or class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.culprit import Culprit

Shows = Callable[[tuple[np.ndarray, ...]], bool]  # whether outputs show the bug (a divergence, say)


@runtime_checkable
class RuntimeOptimizer(Protocol):
    """ONNX Runtime's own optimizer as a converter: its model is the runtime's, its option `level_option` names the
    level, and it bisects its own rewrites to name the one behind a bug."""

    level_option: str

    def bisect(self, source: Source, options: Any, run: TargetRun, shows: Shows) -> Culprit | None:
        """The lowest level whose run `shows` the bug and, where disabling one rewrite alone removes it, that one."""

    def bisect_crash(self, source: Source, options: Any) -> Culprit | None:
        """The same for a crash at graph optimization, which leaves no run to start from."""


@runtime_checkable
class DivergenceLabels(Protocol):
    """A converter that labels a divergence at graph optimization with what runs of its own show (whether its
    reference evaluation diverges too, say)."""

    def divergence_labels(self, source: Source, options: Any, run: TargetRun, shows: Shows) -> tuple[str, ...]:
        """Labels for the verdict of `run`, whose outputs `shows` judged."""
