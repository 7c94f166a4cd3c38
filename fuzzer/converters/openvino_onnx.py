"""openvino-onnx: an upstream ONNX model (an exporter's, or the graph written straight to ONNX) read by OpenVINO's
ONNX frontend (`Core.read_model`, or `openvino.convert_model`, which also runs OpenVINO's offline transformations),
compiled on the CPU plugin and judged against the upstream model's run in ONNX Runtime with optimizations off."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from fuzzer.converters.base import TORCH_HARNESS, Converter
from fuzzer.converters.capabilities import Shows
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.openvino_cpu import (
    DISTRIBUTION,
    PERFORMANCE,
    PRECISIONS,
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
from fuzzer.converters.upstream import UpstreamChoices, UpstreamOptions, export_upstream
from oracles.verdict import Stage

READERS = ("read_model", "convert_model")


@dataclass(frozen=True)
class OvOnnxOptions(UpstreamOptions, CpuSettings):
    """The upstream model, how OpenVINO reads it (the runtime's `read_model`, or `convert_model` with its offline
    transformations) and the CPU plugin's hints."""

    choices = UpstreamChoices(precision=PRECISIONS, performance=PERFORMANCE, reader=READERS)
    reader: str = "read_model"



class OpenVinoOnnx(Converter[OvOnnxOptions]):
    name = "openvino-onnx"
    display_name = "OpenVINO ONNX frontend"
    project = PROJECT
    distribution = DISTRIBUTION
    tracker = TRACKER
    role = Role.IMPORTER
    framework = "onnx"
    runtime = "openvino"
    libraries = ("openvino", "onnxruntime")
    distributions = ("onnx", "onnxruntime", "openvino")
    options_type = OvOnnxOptions
    # As openvino-pytorch's: `divergence_labels` tells the frontend's translation from the CPU plugin.
    divergence_stage = Stage.GRAPH_OPTIMIZATION
    unsupported_messages = UNSUPPORTED_MESSAGES
    source_harness = (*TORCH_HARNESS, "openvino_run")  # a case with no upstream.onnx (its worker died)
    # From upstream.onnx, repro.py needs openvino and numpy alone (the case's tensors read without onnx).
    upstream_harness = ("head", "openvino_tensors", "judging", "child", "openvino_run", "openvino_upstream")
    repro_conversion = "openvino_onnx_on_export"
    repro_upstream_conversion = "convert_with_openvino_onnx"

    def snippet(self, options: OvOnnxOptions) -> Snippet:
        return Snippet(("import openvino as ov",), (read_line(options.reader),
                       compile_line("ov_model", options.precision, options.performance)),
                       runs=("got = list(compiled(inputs).values())",))

    def label_evidence(self, labels: Sequence[str]) -> tuple[str, ...]:
        return reference_evidence(labels)

    def component(self, site: FaultSite) -> Component:
        """The CPU plugin where the evidence says so, the ONNX frontend's translation otherwise."""
        plugin = plugin_component(site)
        if plugin is not None:
            return plugin
        reader = "convert_model, with its offline transformations" if site.options.get("reader") == "convert_model" \
            else "read_model"
        return self.own_component(f"ONNX frontend ({reader}): the translation {site.named()}")

    def avoid_settings(self, options: OvOnnxOptions, hints: Hints) -> tuple[Setting, ...]:
        """The other reader, the CPU plugin's other hints, then the PyTorch frontend on the module itself."""
        data = options.to_json()
        other = next(r for r in READERS if r != options.reader)
        reader = Setting(f"the model read by {other}", self.name, {**data, "reader": other}, read_line(other))
        plugin = other_settings(self.name, options, lambda d: read_line(d["reader"]))
        direct = Setting("OpenVINO's PyTorch frontend on the module itself", "openvino-pytorch",
                         {"precision": options.precision, "performance": options.performance},
                         "ov_model = ov.convert_model(module, example_input=tuple(inputs))")
        return (reader, *plugin, direct)

    def convert_impl(self, source: Source, options: OvOnnxOptions) -> TargetRun:
        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps)
        with steps.at(Stage.NODE_CONVERSION, "convert"):
            model = read_onnx(up.data, options.reader)
        outputs, dtypes = compile_and_run(model, model_feeds(model, source), options.precision, options.performance,
                                          steps)
        check_range((*source.inputs, *source.module.state_dict().values()), steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), baseline=up.outputs, baseline_model=up.data,
                         baseline_dtypes=up.output_dtypes, computed_in=computed_in(options.precision))

    def divergence_labels(self, source: Source, options: OvOnnxOptions, run: TargetRun,
                          shows: Shows) -> tuple[str, ...]:
        """Whether OpenVINO's reference evaluation of the frontend's model shows the divergence too."""
        data = run.baseline_model
        if data is None:
            return ()
        model = read_onnx(data, options.reader)
        return reference_labels(lambda: read_onnx(data, options.reader), model_feeds(model, source), shows)


def read_onnx(data: bytes, reader: str) -> Any:
    """The ONNX frontend's ov.Model of the serialized model, by the reader read_line writes."""
    import openvino as ov

    if reader == "convert_model":
        return ov.convert_model(io.BytesIO(data))
    return ov.Core().read_model(data)


def read_line(reader: str) -> str:
    """The user's reading of model.onnx into `ov_model`."""
    if reader == "convert_model":
        return 'ov_model = ov.convert_model("model.onnx")'
    return 'ov_model = ov.Core().read_model("model.onnx")'


def model_feeds(model: Any, source: Source) -> Sequence[torch.Tensor]:
    """The source's inputs in the model's input order: by name (an exporter may drop an input no output reads),
    else in order."""
    by_name = dict(zip(source.input_names, source.inputs, strict=True))
    names = [next((n for n in sorted(p.get_names()) if n in by_name), "") for p in model.inputs]
    if all(n in by_name for n in names):
        return [by_name[n] for n in names]
    return list(source.inputs)[:len(names)]
