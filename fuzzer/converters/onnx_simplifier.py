"""onnxsim: onnx-simplifier (constant folding and graph cleanup via onnxoptimizer and shape inference)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from fuzzer.converters.base import ConverterOptions, Snippet
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions


@dataclass(frozen=True)
class OnnxSimOptions(UpstreamOptions):
    perform_optimization: bool = True
    skip_fuse_bn: bool = False


class OnnxSim(OnnxPassConverter):
    name = "onnxsim"
    display_name = "onnxsim"
    project = "onnxsim"
    tracker = "https://github.com/daquexian/onnx-simplifier/issues"

    def snippet(self, options: ConverterOptions) -> Snippet:
        opts: OnnxSimOptions = options  # type: ignore[assignment]
        return Snippet(("import onnxsim",), (
            f"model, _ = onnxsim.simplify(model, check_n=0, perform_optimization={opts.perform_optimization}, "
            f"skip_fuse_bn={opts.skip_fuse_bn})",))
    libraries = ("onnxsim", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxsim")
    options_type = OnnxSimOptions

    def transform(self, model: onnx.ModelProto, options: OnnxSimOptions) -> onnx.ModelProto:
        import onnxsim

        # check_n=0: onnxsim's own output check would run ORT inside this stage; the oracle does it instead.
        simplified, _ = onnxsim.simplify(model, check_n=0, perform_optimization=options.perform_optimization,
                                         skip_fuse_bn=options.skip_fuse_bn)
        return simplified
