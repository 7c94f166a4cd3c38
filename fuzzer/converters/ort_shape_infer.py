"""ort-shape-infer: ONNX Runtime's symbolic shape inference (`onnxruntime.tools.symbolic_shape_infer`), which the
transformers optimizer, quantization's preprocessing and the TensorRT provider's users run on a model to write
every tensor's shape into it. Its model must still pass ONNX's checker and strict shape inference (a shape it
writes that ONNX infers otherwise fails there) and compute what the model it was given computes."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass

import onnx

from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.ort_optimizer import ORT_TRACKER
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.support.quiet import library_output
from oracles.verdict import Stage


@dataclass(frozen=True)
class OrtShapeInferOptions(UpstreamOptions):
    # Merge conflicting symbolic dims (as the transformers optimizer calls it). Its other flag, guess_output_rank,
    # is left off: a rank it guesses for an operator it does not know is a documented heuristic, not a defect.
    auto_merge: bool = True


class OrtShapeInfer(OnnxPassConverter[OrtShapeInferOptions]):
    name = "ort-shape-infer"
    display_name = "ONNX Runtime symbolic shape inference"
    project = "ONNX Runtime"
    distribution = "onnxruntime"
    tracker = ORT_TRACKER
    libraries = ("onnxruntime", "onnxruntime.tools.symbolic_shape_infer")
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = OrtShapeInferOptions
    transform_stage = Stage.GRAPH_OPTIMIZATION
    # Its documented refusal of a model some of whose shapes it cannot infer (it names no defect of its own).
    unsupported_messages = (r"Incomplete symbolic shape inference",)

    def component(self, site: FaultSite) -> Component:
        """Its inference of the operator the bug is on (SymbolicShapeInference's handler of that op type)."""
        return self.own_component(f"symbolic shape inference (onnxruntime.tools.symbolic_shape_infer) {site.named()}")

    def snippet(self, options: OrtShapeInferOptions) -> Snippet:
        return Snippet(("from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference",), (
            f"model = SymbolicShapeInference.infer_shapes(model, auto_merge={options.auto_merge})",))

    def avoid_settings(self, options: OrtShapeInferOptions, hints: Hints) -> tuple[Setting, ...]:
        """The other auto_merge (symbolic dims merged or not)."""
        other = not options.auto_merge
        return (Setting(f"auto_merge={other}", self.name, {**options.to_json(), "auto_merge": other},
                        f"model = SymbolicShapeInference.infer_shapes(model, auto_merge={other})"),)

    def transform(self, model: onnx.ModelProto, options: OrtShapeInferOptions) -> onnx.ModelProto:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        # It saves the model to sym_shape_infer_temp.onnx in the working folder when it cannot infer every shape:
        # run it in a folder of its own, so that nothing is left beside the campaign.
        with library_output(), tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
            return SymbolicShapeInference.infer_shapes(model, auto_merge=options.auto_merge)
