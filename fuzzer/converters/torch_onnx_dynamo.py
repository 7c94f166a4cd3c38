"""torch-onnx-dynamo: torch.export capture, translation to ONNX through onnxscript's torchlib, optional optimizer.

The three steps are run separately so a failure names its stage: torch.onnx's capture (torch.export) is capture, the
translation (decompositions plus torchlib) is node conversion, ONNXProgram.optimize is graph optimization.
"""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass
from typing import Any

import onnx
import torch

from fuzzer.converters import onnxscript_rules
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun, share_export
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.exporter_settings import DYNAMO_OPSETS, export_call, exporter_settings
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.setting import Hints, Setting
from oracles.verdict import Stage

ONNXSCRIPT_TRACKER = "https://github.com/microsoft/onnxscript/issues"
TORCHLIB_MIN_OPSET = 18  # torchlib has no implementations below this; lower opsets are version-converted


@dataclass(frozen=True)
class DynamoOptions(ConverterOptions):
    opset_range = DYNAMO_OPSETS
    opset: int = 18
    optimize: bool = True
    dynamic: bool = False  # mark the source's dynamic dims in dynamic_shapes (a check also runs a second shape)


@functools.lru_cache(maxsize=4)
def _torchlib_registry(opset: int) -> Any:
    """Building the torchlib registry takes seconds and torch.onnx.export rebuilds it on every call; it is
    read-only during export, so one per opset per process is shared (the only cache in the converters)."""
    from torch.onnx._internal.exporter import _registration

    return _registration.ONNXRegistry().from_torchlib(opset_version=opset)


def _translate(program: torch.export.ExportedProgram, source: Source, opset: int) -> Any:
    """ExportedProgram -> ONNXProgram without optimization; the private entry point only to reuse the registry."""
    names = dict(input_names=list(source.input_names), output_names=list(source.graph.outputs))
    try:
        from torch.onnx._internal.exporter import _core
    except ImportError:  # the private module moved: the public API works, only slower
        return torch.onnx.export(program, source.inputs, dynamo=True, optimize=False, opset_version=opset,
                                 verbose=False, **names)
    registry = _torchlib_registry(max(opset, TORCHLIB_MIN_OPSET))
    return _core.export(program, source.inputs, registry=registry, optimize=False, opset_version=opset,
                        verbose=False, **names)


def capture(module: torch.nn.Module, inputs: tuple[Any, ...], shapes: Any) -> torch.export.ExportedProgram:
    """The ExportedProgram torch.onnx.export captures: its own capture strategies, in its order, raising the first
    one's error as it does. A bare `torch.export.export` differs (torch.onnx's non-strict capture treats sizes 0 and
    1 as generic and refines the dynamic shapes torch.export suggests), so it would file failures no user sees."""
    try:
        from torch.onnx._internal.exporter import _capture_strategies
    except ImportError:  # the private module moved: the public capture, without torch.onnx's retries
        return torch.export.export(module, inputs, dynamic_shapes=shapes, strict=False)
    errors: list[Exception] = []
    strategies: list[Any] = list(_capture_strategies.CAPTURE_STRATEGIES)  # concrete subclasses of an abstract base
    for strategy_class in strategies:
        result = strategy_class()(module, inputs, None, dynamic_shapes=shapes)
        if result.exported_program is not None:
            return result.exported_program
        if result.exception is not None:
            errors.append(result.exception)
    raise errors[0] if errors else RuntimeError("torch.onnx captured no program and raised no error")


def export_dynamo(source: Source, options: DynamoOptions, steps: Steps,
                  unoptimized: list[onnx.ModelProto] | None = None) -> onnx.ModelProto:
    """The dynamo export of `source`, each step under its stage; `unoptimized`, when given, receives the model as
    it was before the optimizer ran (for the replay of its rules)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # GraphModule.forward takes *inputs: its dynamic_shapes are one tuple, for that one argument.
        shapes = (source.dynamic_axes().dynamo_shapes(source.input_names),) if options.dynamic else None
        with steps.at(Stage.CAPTURE, "capture"):
            program = capture(source.module, source.inputs, shapes)
        with steps.at(Stage.NODE_CONVERSION, "export"):
            onnx_program = _translate(program, source, options.opset)
        if options.optimize:
            if unoptimized is not None:
                unoptimized.append(onnx_program.model_proto)
            with steps.at(Stage.GRAPH_OPTIMIZATION, "optimize"):
                onnx_program.optimize()
        with steps.at(Stage.SERIALIZATION, "serialization"):
            return onnx_program.model_proto


class TorchOnnxDynamo(Converter[DynamoOptions]):
    name = "torch-onnx-dynamo"
    role = Role.EXPORTER
    framework = "pytorch"
    runtime = "onnxruntime"
    repro_conversion = "export_and_run_dynamo"
    repro_upstream_export = "upstream_by_dynamo"
    display_name = "torch.onnx.export (dynamo)"
    project = "PyTorch"
    distribution = "torch"
    tracker = "https://github.com/pytorch/pytorch/issues"

    def component(self, site: FaultSite) -> Component:
        """torch.export for a capture failure, onnxscript's optimizer for one in `optimize`, and the operator's
        translation otherwise: onnxscript's where the failing frame is onnxscript's, torch.onnx's own else."""
        if site.stage is Stage.CAPTURE:
            return self.own_component("torch.export (capture and decompositions)")
        if site.stage is Stage.GRAPH_OPTIMIZATION or site.frame_owner == "onnxscript":
            what = ("its optimizer (`onnx_program.optimize()`)" if site.stage is Stage.GRAPH_OPTIMIZATION
                    else f"the translation {site.named()}")
            return Component("onnxscript", f"onnxscript: {what}", ONNXSCRIPT_TRACKER, self.name, "onnxscript")
        return self.own_component(f"dynamo exporter: the translation {site.named()}")

    def snippet(self, options: DynamoOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        dims, shapes = (dynamic or DynamicAxes(())).dynamo_source() if options.dynamic else ((), "")
        marked = f", dynamic_shapes=tuple(map({shapes}.get, INPUT_NAMES))" if options.dynamic else ""
        return Snippet(("import torch",), (*dims,
            f"model = torch.onnx.export(module, inputs, dynamo=True, opset_version={options.opset}, "
            f"optimize={options.optimize}, input_names=INPUT_NAMES{marked}).model_proto",), from_torch=True)
    libraries = ("torch", "torch.onnx", "onnx", "onnxscript", "onnxruntime")
    distributions = ("torch", "onnx", "onnxscript", "onnxruntime")
    options_type = DynamoOptions

    def avoid_settings(self, options: DynamoOptions, hints: Hints) -> tuple[Setting, ...]:
        """The optimizer off, the session's levels (a divergence), the nearest opsets, the TorchScript exporter."""
        data = options.to_json()
        own = (Setting("the dynamo exporter's optimizer off", self.name, {**data, "optimize": False},
                       export_call(True, options.opset, ", optimize=False")),) if options.optimize else ()
        return exporter_settings(self.name, True, data, own, hints)

    def supported_aten_ops(self) -> frozenset[str]:
        """The ATen operators with a torchlib translation (overloads folded into their operator)."""
        from torch.onnx._internal.exporter import _registration

        names = (key for key in _registration.ONNXRegistry.from_torchlib().functions if isinstance(key, str))
        return frozenset(name.split(".")[0] for name in names if name.startswith("aten::"))

    def export_upstream_model(self, source: Source, opset: int, steps: Steps) -> onnx.ModelProto:
        """The dynamo export at `opset`, optimized (as torch.onnx.export's default is)."""
        return export_dynamo(source, DynamoOptions(opset=opset, optimize=True), steps)

    def convert_impl(self, source: Source, options: DynamoOptions) -> TargetRun:
        return share_export(source, self.name, options, lambda: self._convert(source, options))

    def _convert(self, source: Source, options: DynamoOptions) -> TargetRun:
        steps, unoptimized = Steps(), []
        data = check_and_serialize(export_dynamo(source, options, steps, unoptimized), steps)
        outputs, dtypes = run_model(data, source, steps)
        start = time.perf_counter()
        try:
            fired = onnxscript_rules.fired(unoptimized[0]) if unoptimized else ()
        except Exception:  # the replay failing is no verdict on the exporter's own call, which passed
            fired = ()
        steps.timings["rewrites"] = time.perf_counter() - start
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data, rewrites=fired)

    def rewrite_names(self) -> tuple[str, ...]:
        """The optimizer's constant folding, onnxscript's default rewrite rules and its cleanup passes."""
        return onnxscript_rules.rule_names()
