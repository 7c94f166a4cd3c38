"""What a converter is: options, the source it reads, the target run it returns, and stage-tagged failures.

A converter turns a `Source` (the float32 torch module of a graph and its inputs) into a target, runs it and
returns a `TargetRun`. Any failure of the library under test leaves as a `StageError` naming the pipeline
stage; any other exception is a convsmith bug and keeps its traceback. Each converter module imports its
library inside functions, so a missing library makes that converter unavailable and nothing else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.setting import Hints, Setting
from fuzzer.support.lock import installed_version
from oracles.verdict import Stage


@dataclass(frozen=True)
class ConverterInfo:
    """What list_converters reports: name, whether it can run here and why not, library versions."""

    name: str
    available: bool
    reason: str
    versions: Mapping[str, str]


class Converter:
    """Base class: subclasses set the class attributes and implement `convert_impl`.

    `divergence_stage` is the stage a wrong output is blamed on (the step that changed the model).
    """

    name: ClassVar[str]
    libraries: ClassVar[tuple[str, ...]]  # import names that must work
    distributions: ClassVar[tuple[str, ...]]  # package names whose versions key bug cases and probe caches
    options_type: ClassVar[type[ConverterOptions]]
    divergence_stage: ClassVar[Stage] = Stage.NODE_CONVERSION
    display_name: ClassVar[str] = ""  # what its maintainers call it, for report titles
    # Options added after bug cases were written, with the value such a case ran with (its case.json lacks them).
    older_defaults: ClassVar[Mapping[str, Any]] = {}
    # The ONNX Runtime level its target model runs at (a cross-check's AtLevel runs an exporter's at another).
    target_level: ClassVar[str] = "disabled"

    project: ClassVar[str] = ""  # who maintains it ("PyTorch"): the name of its project ("" uses `name`)
    tracker: ClassVar[str] = ""  # where its maintainers take bug reports
    distribution: ClassVar[str] = ""  # the pip distribution holding its own code (what a bisection installs)

    def snippet(self, options: ConverterOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        """The converter's call as a report snippet writes it (see Snippet); an exporter whose `dynamic` option is on
        marks `dynamic` (the case's dims) in it."""
        raise NotImplementedError(f"{self.name} has no report snippet")

    def component(self, site: FaultSite) -> Component:
        """The part of this converter a bug that showed at `site` is in (subclasses name their steps)."""
        return self.own_component(self.display_name or self.name)

    def own_component(self, name: str) -> Component:
        """A component of this converter's own project, keyed by the converter (its root causes stay its own)."""
        return Component(self.project or self.display_name or self.name, name, self.tracker, self.name,
                         self.distribution)

    def target_runtime(self) -> Callable[[bytes, Source], tuple[tuple[np.ndarray, ...], tuple[str, ...]]] | None:
        """How a model this converter made is run, as the diagnosis examines it (raising StageError), where that is
        not ONNX Runtime with optimizations off (None)."""
        return None

    def rewrite_names(self) -> tuple[str, ...] | None:
        """Every rewrite (transformer, pass) the installed library has that this converter's tests can record as
        fired, read from the library itself; None for a converter that does not record them."""
        return None

    def pass_names(self, options: ConverterOptions) -> tuple[str, ...] | None:
        """The passes the options run, for a converter made of named passes each of which can run alone (the
        diagnosis runs each alone); None for any other converter."""
        return None

    def avoid_settings(self, options: ConverterOptions, hints: Hints) -> tuple[Setting, ...]:
        """The settings a user could change to avoid a bug this converter showed under `options`, cheapest (least
        disruptive) first; `hints` is what the case says of its bug. None by default."""
        return ()

    def supported_aten_ops(self) -> frozenset[str] | None:
        """The ATen operators ('aten::name', overloads folded) this converter translates; None when it does not
        start from PyTorch (the ONNX tools) and so has no such list."""
        return None

    def availability(self) -> tuple[bool, str]:
        """(True, "") when every library imports; else (False, the import error)."""
        for lib in self.libraries:
            try:
                importlib.import_module(lib)
            except Exception as exc:  # a broken install may raise anything at import time
                return False, f"import {lib} failed: {type(exc).__name__}: {exc}"
        return True, ""

    def versions(self) -> dict[str, str]:
        return {d: distribution_version(d) for d in self.distributions}

    def info(self) -> ConverterInfo:
        ok, reason = self.availability()
        return ConverterInfo(self.name, ok, reason, self.versions())

    def options(self, data: ConverterOptions | Mapping[str, Any] | None = None) -> ConverterOptions:
        """Options from an instance, a JSON mapping or None (defaults); the wrong type raises TypeError."""
        if data is None:
            return self.options_type()
        if isinstance(data, ConverterOptions):
            if not isinstance(data, self.options_type):
                raise TypeError(f"{self.name} takes {self.options_type.__name__}, not {type(data).__name__}")
            return data
        return self.options_type.from_json(data)

    def convert(self, source: Source, options: ConverterOptions | None = None) -> TargetRun:
        """Convert and run; raises StageError (library failure) or UpstreamError (the step before failed)."""
        opts = self.options(options)
        run = self.convert_impl(source, opts)
        if len(run.outputs) != len(run.output_dtypes):
            raise AssertionError(f"{self.name}: {len(run.outputs)} outputs but {len(run.output_dtypes)} dtypes")
        return run

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        raise NotImplementedError


def distribution_version(name: str) -> str:
    return installed_version(name) or "not installed"
