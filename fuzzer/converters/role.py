"""What part of the path from a framework to a runtime a converter plays: the one enum every wing keys on instead of
converter names (which converters export, which start from an upstream ONNX model, which cross-check which)."""

from __future__ import annotations

from enum import Enum


class Role(Enum):
    """EXPORTER: a framework's model to ONNX; ONNX_TOOL: ONNX to ONNX; IMPORTER: ONNX into a framework. The last two
    start from an upstream ONNX model (an exporter's, or the graph written straight to ONNX)."""

    EXPORTER = "exporter"
    ONNX_TOOL = "onnx-tool"
    IMPORTER = "importer"

    @property
    def starts_upstream(self) -> bool:
        """Whether a converter of this role starts from an upstream ONNX model (its options name the upstream)."""
        return self is not Role.EXPORTER


__all__ = ["Role"]
