"""onnxslim: pattern fusion, constant folding and dead-code removal on ONNX graphs."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from fuzzer.converters.base import ConverterOptions, Snippet
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions


@dataclass(frozen=True)
class OnnxSlimOptions(UpstreamOptions):
    no_constant_folding: bool = False


class OnnxSlim(OnnxPassConverter):
    name = "onnxslim"
    display_name = "onnxslim"
    project = "onnxslim"
    tracker = "https://github.com/inisis/OnnxSlim/issues"

    def snippet(self, options: ConverterOptions) -> Snippet:
        opts: OnnxSlimOptions = options  # type: ignore[assignment]
        return Snippet(("import onnxslim",), (
            f"model = onnxslim.slim(model, no_constant_folding={opts.no_constant_folding})",))
    libraries = ("onnxslim", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxslim")
    options_type = OnnxSlimOptions

    def transform(self, model: onnx.ModelProto, options: OnnxSlimOptions) -> onnx.ModelProto:
        import onnxslim

        return onnxslim.slim(model, no_constant_folding=options.no_constant_folding)
