"""onnx2torch: the exported ONNX model converted back to a PyTorch module, compared with the original module.

onnx2torch imports torchvision at import time; a torchvision built for another torch fails there ("operator
torchvision::nms does not exist"), and a missing one raises ModuleNotFoundError: the availability check
reports either as the reason, and the other converters are not affected.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.upstream import UpstreamOptions, export_upstream
from fuzzer.support.tensors import to_oracle_array
from oracles.verdict import Stage


@dataclass(frozen=True)
class OnnxToTorchOptions(UpstreamOptions):
    """The upstream exporter and opset are all there is to choose."""


class OnnxToTorch(Converter):
    name = "onnx2torch"
    display_name = "onnx2torch"
    project = "onnx2torch"
    distribution = "onnx2torch"
    tracker = "https://github.com/ENOT-AutoDL/onnx2torch/issues"
    libraries = ("onnx2torch",)
    distributions = ("torch", "onnx", "onnx2torch")
    options_type = OnnxToTorchOptions

    def convert_impl(self, source: Source, options: OnnxToTorchOptions) -> TargetRun:
        import onnx2torch

        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps, run=False)
        with steps.at(Stage.NODE_CONVERSION, "transform"):
            module = onnx2torch.convert(up.model).to(source.device)
        by_name = dict(zip(source.input_names, source.inputs, strict=True))
        names = [i.name for i in up.model.graph.input if i.name in by_name] or list(source.input_names)
        with steps.at(Stage.RUNTIME_EXECUTION, "runtime"), torch.no_grad():
            result = module(*(by_name[n] for n in names))
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        pairs = [to_oracle_array(r) for r in results]
        return TargetRun(tuple(a for a, _ in pairs), tuple(d for _, d in pairs), dict(steps.timings), model=up.data)
