"""onnxslim: pattern fusion, constant folding and dead-code removal on ONNX graphs."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from fuzzer.converters.describe import Snippet
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions


@dataclass(frozen=True)
class OnnxSlimOptions(UpstreamOptions):
    no_constant_folding: bool = False


class OnnxSlim(OnnxPassConverter):
    name = "onnxslim"
    display_name = "onnxslim"
    project = "onnxslim"
    distribution = "onnxslim"
    tracker = "https://github.com/inisis/OnnxSlim/issues"

    def snippet(self, options: ConverterOptions) -> Snippet:
        opts: OnnxSlimOptions = options  # type: ignore[assignment]
        return Snippet(("import onnxslim",), (
            f"model = onnxslim.slim(model, no_constant_folding={opts.no_constant_folding})",))
    libraries = ("onnxslim", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxslim")
    options_type = OnnxSlimOptions

    def avoid_settings(self, options: ConverterOptions, hints: Hints) -> tuple[Setting, ...]:
        """onnxslim's constant folding off (the one skip flag its options take)."""
        opts: OnnxSlimOptions = options  # type: ignore[assignment]
        if opts.no_constant_folding:
            return ()
        return (Setting("onnxslim's constant folding off", self.name, {**opts.to_json(), "no_constant_folding": True},
                        "model = onnxslim.slim(model, no_constant_folding=True)"),)

    def rewrite_names(self) -> tuple[str, ...]:
        """onnxslim's registered fusion and elimination patterns."""
        from onnxslim.core.pattern.registry import get_fusion_patterns

        return tuple(get_fusion_patterns())

    def fired(self, model: onnx.ModelProto, options: ConverterOptions) -> tuple[str, ...]:
        """The patterns onnxslim's own matcher finds in the model it received, each asked alone (the one call
        `transform` makes names none of them); its dead-code and subexpression passes are not counted."""
        import onnxslim.third_party.onnx_graphsurgeon as gs
        from onnxslim.core.optimization import find_matches
        from onnxslim.core.pattern.registry import get_fusion_patterns

        fired, graph = [], gs.import_onnx(model)
        for name, matchers in get_fusion_patterns().items():
            if find_matches(graph, {name: matchers}):
                fired.append(name)
                graph = gs.import_onnx(model)  # a match may have rewritten what the next pattern reads
        return tuple(fired)

    def transform(self, model: onnx.ModelProto, options: OnnxSlimOptions) -> onnx.ModelProto:
        import onnxslim

        return onnxslim.slim(model, no_constant_folding=options.no_constant_folding)
