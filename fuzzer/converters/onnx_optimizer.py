"""onnxoptimizer: the ONNX project's pass library (fusions and eliminations)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from fuzzer.converters.base import ConverterOptions, Snippet
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions


@dataclass(frozen=True)
class OnnxOptimizerOptions(UpstreamOptions):
    passes: tuple[str, ...] = ()  # empty: onnxoptimizer's fuse-and-elimination set
    fixed_point: bool = False


class OnnxOptimizer(OnnxPassConverter):
    name = "onnxoptimizer"
    display_name = "onnxoptimizer"

    def snippet(self, options: ConverterOptions) -> Snippet:
        opts: OnnxOptimizerOptions = options  # type: ignore[assignment]
        passes = repr(list(opts.passes)) if opts.passes else "onnxoptimizer.get_fuse_and_elimination_passes()"
        return Snippet(("import onnxoptimizer",), (
            f"model = onnxoptimizer.optimize(model, {passes}, fixed_point={opts.fixed_point})",))
    libraries = ("onnxoptimizer", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxoptimizer")
    options_type = OnnxOptimizerOptions

    def transform(self, model: onnx.ModelProto, options: OnnxOptimizerOptions) -> onnx.ModelProto:
        import onnxoptimizer

        passes = list(options.passes) or onnxoptimizer.get_fuse_and_elimination_passes()
        return onnxoptimizer.optimize(model, passes, fixed_point=options.fixed_point)


def fuse_and_elimination_passes() -> tuple[str, ...]:
    """onnxoptimizer's default pass set by name (what empty `passes` runs); its library must import."""
    import onnxoptimizer

    return tuple(onnxoptimizer.get_fuse_and_elimination_passes())
