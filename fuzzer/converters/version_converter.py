"""onnx-version-converter: onnx.version_converter takes the exported model to an older or newer opset."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.setting import Hints, Setting, nearest_opsets
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from oracles.verdict import Stage


@dataclass(frozen=True)
class VersionConverterOptions(UpstreamOptions):
    space = {"target_opset": tuple(range(7, 24))}  # down as well as up, every step the adapters cover
    target_opset: int = 21  # newer by default; set e.g. 13 for the downgrade path


class OnnxVersionConverter(OnnxPassConverter[VersionConverterOptions]):
    name = "onnx-version-converter"
    display_name = "onnx.version_converter"
    project = "ONNX"
    distribution = "onnx"
    tracker = "https://github.com/onnx/onnx/issues"
    # Its TypeRestriction adapter refuses a type the target opset does not allow for the operator ("DataType (16) of
    # Input or Output of operator 'Sin' is unallowed for Opset Version 21", by a failed assertion): a conversion the
    # target cannot express, as "No Adapter" is, not a defect.
    unsupported_messages = (r"is unallowed for Opset Version \d+",)

    def component(self, site: FaultSite) -> Component:
        """The version converter's adapter for the operator the bug is on."""
        return self.own_component(f"version converter: the adapter {site.named()}")

    def snippet(self, options: VersionConverterOptions) -> Snippet:
        return Snippet(("from onnx import version_converter",), (
            f"model = version_converter.convert_version(model, {options.target_opset})",))
    def avoid_settings(self, options: VersionConverterOptions, hints: Hints) -> tuple[Setting, ...]:
        """The nearest other target opsets (another chain of adapters)."""
        low, high = min(options.space["target_opset"]), max(options.space["target_opset"])
        return tuple(Setting(f"target opset {o} instead of {options.target_opset}", self.name,
                             {**options.to_json(), "target_opset": o},
                             f"model = version_converter.convert_version(model, {o})")
                     for o in nearest_opsets(options.target_opset, low, high))

    libraries = ("onnx", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = VersionConverterOptions
    transform_stage = Stage.NODE_CONVERSION  # adapters rewrite nodes from one opset's schema to another's
    divergence_stage = Stage.NODE_CONVERSION

    def transform(self, model: onnx.ModelProto, options: VersionConverterOptions) -> onnx.ModelProto:
        from onnx import version_converter

        return version_converter.convert_version(model, options.target_opset)
