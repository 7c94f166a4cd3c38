"""torch-onnx-script: the TorchScript-based exporter (dynamo=False): a trace of the module, then symbolic conversion."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import onnx
import torch

from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, StageError, Steps, TargetRun, share_export
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.exporter_settings import SCRIPT_OPSETS, export_call, exporter_settings
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.setting import Hints, Setting
from oracles.taxonomy import Failure
from oracles.verdict import Stage


@dataclass(frozen=True)
class ScriptOptions(ConverterOptions):
    opset_range = SCRIPT_OPSETS
    older_defaults = {"script_module": True}  # cases written before it existed exported a jit.trace'd ScriptModule
    opset: int = 17
    constant_folding: bool = True
    script_module: bool = False  # export a torch.jit.trace'd ScriptModule instead of the nn.Module
    dynamic: bool = False  # mark the source's dynamic dims in dynamic_axes (a check also runs a second shape)


# torch.onnx.export traces an nn.Module itself (torch.jit._get_trace_graph): an error raised from the tracer's file
# is the capture's. Exporting the module, as most users do, also skips making and freezing a ScriptModule (a good
# share of a small graph's export); the ScriptModule path (script_module=True) meets failures of its own.
TRACER_FILE = "torch/jit/_trace.py"


def export_script(source: Source, options: ScriptOptions, steps: Steps) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings and the exporter's deprecation notice
        model: torch.nn.Module = source.module
        if options.script_module:
            with steps.at(Stage.CAPTURE, "capture"):
                model = torch.jit.trace(source.module, source.inputs, check_trace=False)
        try:
            with steps.at(Stage.NODE_CONVERSION, "export"):
                torch.onnx.export(
                    model, source.inputs, buffer, dynamo=False, opset_version=options.opset,
                    input_names=list(source.input_names), output_names=list(source.graph.outputs),
                    do_constant_folding=options.constant_folding,
                    dynamic_axes=source.dynamic_axes().script_axes() if options.dynamic else None,
                )
        except StageError as err:
            if err.__cause__ is not None and raised_while_tracing(err.__cause__):
                raise StageError(Failure.of(Stage.CAPTURE, err.__cause__), timings=err.timings) from err.__cause__
            raise
    with steps.at(Stage.SERIALIZATION, "serialization"):
        return onnx.load_from_string(buffer.getvalue())


def raised_while_tracing(exc: BaseException) -> bool:
    """Whether the exception passed through torch's tracer (the capture stage of the export)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith(TRACER_FILE):
            return True
        tb = tb.tb_next
    return False


class TorchOnnxScript(Converter[ScriptOptions]):
    name = "torch-onnx-script"
    role = Role.EXPORTER
    framework = "pytorch"
    runtime = "onnxruntime"
    superseded_by = "torch-onnx-dynamo"  # torch 2.11 deprecated the TorchScript exporter
    repro_conversion = "export_and_run_script"
    repro_upstream_export = "upstream_by_script"
    display_name = "torch.onnx.export (TorchScript)"
    project = "PyTorch"
    distribution = "torch"
    tracker = "https://github.com/pytorch/pytorch/issues"

    def component(self, site: FaultSite) -> Component:
        """Tracing for a capture failure; else the operator's symbolic function, which emits its ONNX nodes."""
        if site.stage is Stage.CAPTURE:
            return self.own_component("torch.jit tracing (the TorchScript exporter's capture)")
        if site.stage is Stage.GRAPH_OPTIMIZATION:
            return self.own_component("TorchScript exporter: its ONNX graph passes (constant folding, peepholes)")
        return self.own_component(f"TorchScript exporter: the symbolic function {site.named()}")

    def snippet(self, options: ScriptOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        trace = ("module = torch.jit.trace(module, inputs, check_trace=False)",) if options.script_module else ()
        names = ", output_names=OUTPUT_NAMES" if options.dynamic else ""
        axes = f", dynamic_axes={(dynamic or DynamicAxes(())).script_axes()!r}" if options.dynamic else ""
        return Snippet(("import onnx", "import torch"), (*trace,
            f'torch.onnx.export(module, inputs, "model.onnx", dynamo=False, opset_version={options.opset}, '
            f"do_constant_folding={options.constant_folding}, input_names=INPUT_NAMES{names}{axes})",
            'model = onnx.load("model.onnx")'), from_torch=True)

    def avoid_settings(self, options: ScriptOptions, hints: Hints) -> tuple[Setting, ...]:
        """Constant folding off, the session's levels (a divergence), the nearest opsets, the dynamo exporter."""
        data = options.to_json()
        own = (Setting("constant folding off", self.name, {**data, "constant_folding": False},
                       export_call(False, options.opset, ", do_constant_folding=False")),
               ) if options.constant_folding else ()
        return exporter_settings(self.name, False, data, own, hints)

    libraries = ("torch", "torch.onnx", "onnx", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime")

    def supported_aten_ops(self) -> frozenset[str]:
        """The ATen operators with a TorchScript symbolic function (at any opset)."""
        from torch.onnx._internal.torchscript_exporter import registration

        return frozenset(name for name in registration.registry._registry if name.startswith("aten::"))
    options_type = ScriptOptions

    def export_upstream_model(self, source: Source, opset: int, steps: Steps) -> onnx.ModelProto:
        """The TorchScript export at `opset`, its other options at their defaults."""
        return export_script(source, ScriptOptions(opset=opset), steps)

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        return share_export(source, self.name, options, lambda: self._convert(source, options))

    def _convert(self, source: Source, options: ScriptOptions) -> TargetRun:
        steps = Steps()
        data = check_and_serialize(export_script(source, options, steps), steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)
