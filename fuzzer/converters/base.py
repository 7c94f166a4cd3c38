"""What a converter is: options, the source it reads, the target run it returns, and stage-tagged failures.

A converter turns a `Source` (the float32 torch module of a graph and its inputs) into a target, runs it and
returns a `TargetRun`. Any failure of the library under test leaves as a `StageError` naming the pipeline
stage; any other exception is a convsmith bug and keeps its traceback. Each converter module imports its
library inside functions, so a missing library makes that converter unavailable and nothing else.

One class declares a converter: `class Mine(Converter[MyOptions])` with its name, role, framework, runtime,
options type, libraries and distributions, and `convert_impl`. Who owns it (`describe.Owned`), what it needs
installed (`library.Library`) and how its repro.py is assembled (`repro_recipe.ReproRecipe`) have defaults it may
override; what it can do beyond converting (a snippet, settings that avoid a bug, rewrite coverage, a bisection)
it opts into by defining the members of a capability (`capabilities.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.describe import Owned
from fuzzer.converters.library import Library
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.repro_recipe import TORCH_HARNESS, UPSTREAM_HARNESS, ReproRecipe
from fuzzer.converters.role import Role
from oracles.verdict import Stage

__all__ = ["TORCH_HARNESS", "UPSTREAM_HARNESS", "Converter", "ConverterInfo", "OptionsT"]

OptionsT = TypeVar("OptionsT", bound=ConverterOptions)


@dataclass(frozen=True)
class ConverterInfo:
    """What list_converters reports: name, role, framework and runtime, whether it can run here and why not,
    library versions."""

    name: str
    available: bool
    reason: str
    versions: Mapping[str, str]
    role: str = ""
    framework: str = ""
    runtime: str = ""


class Converter(Owned, Library, ReproRecipe, Generic[OptionsT]):
    """Base class: subclasses declare the attributes and implement `convert_impl`. Everything the rest of
    convsmith asks of a converter is read off these declarations and its capabilities, never off its name.

    `divergence_stage` is the stage a wrong output is blamed on (the step that changed the model); `onnx_checked`:
    whether the model it writes must pass ONNX's checker (False for a tool writing operators ONNX does not define,
    for ONNX Runtime alone); `target_level`: the ONNX Runtime level its target model runs at."""

    name: str
    role: Role = Role.EXPORTER
    framework: str = "pytorch"  # what its input model is written in ("pytorch", "tensorflow", "onnx")
    runtime: str = "onnxruntime"  # what its output runs on ("onnxruntime", "pytorch", "tflite", ...)
    options_type: type[OptionsT]
    divergence_stage: Stage = Stage.NODE_CONVERSION
    onnx_checked: bool = True
    target_level: str = "disabled"

    def info(self) -> ConverterInfo:
        ok, reason = self.availability()
        return ConverterInfo(self.name, ok, reason, self.versions(), self.role.value, self.framework, self.runtime)

    def options(self, data: ConverterOptions | Mapping[str, Any] | None = None) -> OptionsT:
        """Options from an instance, a JSON mapping or None (defaults); the wrong type raises TypeError."""
        if data is None:
            return self.options_type()
        if isinstance(data, ConverterOptions):
            if not isinstance(data, self.options_type):
                raise TypeError(f"{self.name} takes {self.options_type.__name__}, not {type(data).__name__}")
            return data
        return self.options_type.from_json(data)

    def convert(self, source: Source, options: ConverterOptions | Mapping[str, Any] | None = None) -> TargetRun:
        """Convert and run; raises StageError (library failure) or UpstreamError (the step before failed)."""
        run = self.convert_impl(source, self.options(options))
        if len(run.outputs) != len(run.output_dtypes):
            raise AssertionError(f"{self.name}: {len(run.outputs)} outputs but {len(run.output_dtypes)} dtypes")
        return run

    def convert_impl(self, source: Source, options: OptionsT) -> TargetRun:
        raise NotImplementedError
