"""openvino-pytorch: the source module converted directly by `openvino.convert_model`'s PyTorch frontend (the module
traced with its example inputs, or a `torch.export` program), compiled on the CPU plugin and judged against eager
PyTorch.

Traced with example inputs alone, the frontend makes every input dimension dynamic (its default); `static_shapes`
gives it the inputs' shapes instead. An exported program is captured with the graph's leading dimensions as
`Dim.AUTO` hints, or static.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import Shows
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.openvino_cpu import (
    DISTRIBUTION,
    PROJECT,
    TRACKER,
    UNSUPPORTED_MESSAGES,
    CpuSettings,
    check_range,
    compile_and_run,
    compile_line,
    computed_in,
    other_settings,
    plugin_component,
    reference_evidence,
    reference_labels,
)
from fuzzer.converters.role import Role
from fuzzer.converters.setting import Hints, Setting
from oracles.verdict import Stage

CAPTURES = ("trace", "export")
# How the frontend reports that torch.jit.trace, which it runs on the module, failed (torch's error follows).
TRACING_FAILED = "Couldn't get TorchScript module by tracing"
PYTORCH_TRACKER = "https://github.com/pytorch/pytorch/issues"


@dataclass(frozen=True)
class OvPytorchOptions(CpuSettings):
    """How the frontend gets the module (traced with example inputs, or a torch.export program), whether it is told
    the inputs' static shapes, and the CPU plugin's hints."""

    choices = {**CpuSettings.choices, "capture": CAPTURES}
    capture: str = "trace"
    static_shapes: bool = False



class OpenVinoPytorch(Converter[OvPytorchOptions]):
    name = "openvino-pytorch"
    display_name = "OpenVINO PyTorch frontend"
    project = PROJECT
    distribution = DISTRIBUTION
    tracker = TRACKER
    role = Role.EXPORTER
    framework = "pytorch"
    runtime = "openvino"
    libraries = ("openvino", "torch")
    distributions = ("torch", "openvino")
    options_type = OvPytorchOptions
    # A wrong value comes out of the model the frontend made as the CPU plugin transformed and ran it:
    # `divergence_labels` (asked at this stage) tells which of the two from OpenVINO's reference evaluation of that
    # model.
    divergence_stage = Stage.GRAPH_OPTIMIZATION
    unsupported_messages = UNSUPPORTED_MESSAGES
    # repro.py needs torch, openvino and numpy alone (the case's tensors read without onnx)
    source_harness = ("head", "openvino_tensors", "judging", "child", "openvino_run", "openvino_torch")
    repro_conversion = "convert_with_openvino_pytorch"

    def snippet(self, options: OvPytorchOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        return Snippet(("import openvino as ov", "import torch"), (*convert_lines(options.to_json()),
                       compile_line("ov_model", options.precision, options.performance)), from_torch=True,
                       runs=("got = list(compiled([x.numpy() for x in inputs]).values())",))

    def label_evidence(self, labels: Sequence[str]) -> tuple[str, ...]:
        return reference_evidence(labels)

    def component(self, site: FaultSite) -> Component:
        """torch.export or torch.jit.trace for a capture failure (the frontend traces the module itself, and says so
        when tracing fails) or where the failing frame is torch's, the CPU plugin where the evidence says so, and the
        frontend's translation otherwise."""
        traced = site.options.get("capture", "trace") == "trace"
        if site.stage is Stage.CAPTURE and not traced:
            return Component("PyTorch", "torch.export (capture and decompositions)", PYTORCH_TRACKER, self.name,
                             "torch")
        if site.stage is Stage.CAPTURE or (site.stage is Stage.NODE_CONVERSION and site.frame_owner == "torch"):
            return Component("PyTorch", "torch.jit.trace, as OpenVINO's frontend traces the module", PYTORCH_TRACKER,
                             self.name, "torch")
        plugin = plugin_component(site)
        if plugin is not None:
            return plugin
        return self.own_component(f"PyTorch frontend: the translation {site.named()}")

    def avoid_settings(self, options: OvPytorchOptions, hints: Hints) -> tuple[Setting, ...]:
        """The other capture, static shapes, the CPU plugin's other hints, then the ONNX frontend."""
        data = options.to_json()
        other = "export" if options.capture == "trace" else "trace"
        changes = [(f"the frontend given a {'torch.export program' if other == 'export' else 'traced module'}",
                    {"capture": other})]
        if not options.static_shapes:
            changes.append(("the frontend told the inputs' static shapes", {"static_shapes": True}))
        own = [Setting(what, self.name, {**data, **changed}, "; ".join(convert_lines({**data, **changed})))
               for what, changed in changes]
        plugin = other_settings(self.name, options, lambda d: "; ".join(convert_lines(d)))
        onnx_route = Setting("OpenVINO's ONNX frontend on the dynamo exporter's model", "openvino-onnx",
                             {"upstream": "torch-onnx-dynamo", "opset": 18, "precision": options.precision,
                              "performance": options.performance},
                             'torch.onnx.export(module, inputs, "model.onnx", dynamo=True); '
                             'ov_model = ov.convert_model("model.onnx")')
        return (*own, *plugin, onnx_route)

    def convert_impl(self, source: Source, options: OvPytorchOptions) -> TargetRun:
        steps = Steps()
        model = convert_module(source, options, steps)
        outputs, dtypes = compile_and_run(model, source.inputs, options.precision, options.performance, steps)
        check_range((*source.inputs, *source.module.state_dict().values()), steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), computed_in=computed_in(options.precision))

    def divergence_labels(self, source: Source, options: OvPytorchOptions, run: TargetRun,
                          shows: Shows) -> tuple[str, ...]:
        """Whether OpenVINO's reference evaluation of the frontend's model shows the divergence too."""
        return reference_labels(lambda: convert_module(source, options, Steps()), source.inputs, shows)


def convert_module(source: Source, options: OvPytorchOptions, steps: Steps) -> Any:
    """The frontend's ov.Model of the source module, as convert_lines writes the call (torch.export's capture at
    Stage.CAPTURE, the frontend at Stage.NODE_CONVERSION)."""
    import openvino as ov
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if options.capture == "export":
            # GraphModule.forward takes *inputs: its dynamic_shapes are one tuple, for that one argument.
            shapes = None if options.static_shapes else (
                source.dynamic_axes().dynamo_shapes(source.input_names),)
            with steps.at(Stage.CAPTURE, "capture"):
                program = torch.export.export(source.module, tuple(source.inputs), dynamic_shapes=shapes,
                                              strict=False)
            with steps.at(Stage.NODE_CONVERSION, "convert"):
                return ov.convert_model(program)
        shapes_given: dict[str, Any] = {"input": [ov.PartialShape(list(x.shape)) for x in source.inputs]} \
            if options.static_shapes else {}
        traced: RuntimeError | None = None
        with steps.at(Stage.NODE_CONVERSION, "convert"):
            try:
                return ov.convert_model(source.module, example_input=tuple(source.inputs), **shapes_given)
            except RuntimeError as exc:
                if TRACING_FAILED not in str(exc):
                    raise
                traced = exc
        with steps.at(Stage.CAPTURE, "capture"):  # torch.jit.trace failed inside the frontend: torch's capture
            raise traced


def convert_lines(options: dict[str, Any]) -> tuple[str, ...]:
    """The user's conversion of `module` on `inputs` under `options` (as JSON), into `ov_model`."""
    static = bool(options.get("static_shapes"))
    if options.get("capture") == "export":
        # the leading dimension of each input of 2 or more rows, as a hint (leading_axes)
        shapes = "" if static else (", dynamic_shapes=tuple({0: torch.export.Dim.AUTO} if x.dim() and x.shape[0] >= 2 "
                                    "else None for x in inputs)")
        return (f"program = torch.export.export(module, tuple(inputs){shapes}, strict=False)",
                "ov_model = ov.convert_model(program)")
    given = ", input=[ov.PartialShape(list(x.shape)) for x in inputs]" if static else ""
    return (f"ov_model = ov.convert_model(module, example_input=tuple(inputs){given})",)
