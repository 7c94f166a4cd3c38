"""torch-onnx-script: the TorchScript-based exporter (dynamo=False): jit.trace capture, then symbolic conversion."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import onnx
import torch

from fuzzer.converters.base import Converter, ConverterOptions, Snippet, Source, Steps, TargetRun
from fuzzer.converters.runtime import check_and_serialize, run_model
from oracles.verdict import Stage


@dataclass(frozen=True)
class ScriptOptions(ConverterOptions):
    opset_range = (7, 20)  # torch.onnx's ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET
    opset: int = 17
    constant_folding: bool = True


def export_script(source: Source, options: ScriptOptions, steps: Steps) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings and the exporter's deprecation notice
        with steps.at(Stage.CAPTURE, "capture"):
            traced = torch.jit.trace(source.module, source.inputs, check_trace=False)
        buffer = io.BytesIO()
        with steps.at(Stage.NODE_CONVERSION, "export"):
            torch.onnx.export(
                traced, source.inputs, buffer, dynamo=False, opset_version=options.opset,
                input_names=list(source.input_names), output_names=list(source.graph.outputs),
                do_constant_folding=options.constant_folding,
            )
    with steps.at(Stage.SERIALIZATION, "serialization"):
        return onnx.load_from_string(buffer.getvalue())


class TorchOnnxScript(Converter):
    name = "torch-onnx-script"
    display_name = "torch.onnx.export (TorchScript)"

    def snippet(self, options: ConverterOptions) -> Snippet:
        opts: ScriptOptions = options  # type: ignore[assignment]
        return Snippet(("import onnx", "import torch"), (
            "traced = torch.jit.trace(module, inputs, check_trace=False)",
            f'torch.onnx.export(traced, inputs, "model.onnx", dynamo=False, opset_version={opts.opset}, '
            f"do_constant_folding={opts.constant_folding}, input_names=INPUT_NAMES)",
            'model = onnx.load("model.onnx")'), from_torch=True)
    libraries = ("torch", "onnx", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime")

    def supported_aten_ops(self) -> frozenset[str]:
        """The ATen operators with a TorchScript symbolic function (at any opset)."""
        from torch.onnx._internal.torchscript_exporter import registration

        return frozenset(name for name in registration.registry._registry if name.startswith("aten::"))
    options_type = ScriptOptions

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        steps = Steps()
        data = check_and_serialize(export_script(source, options, steps), steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)
