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
import onnx

from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.rewrite_view import RewriteView
from fuzzer.converters.role import Role
from fuzzer.converters.setting import Hints, Setting
from fuzzer.support.lock import installed_version
from generators.ir import Graph
from generators.ops.base import OpSpec
from generators.registry import REGISTRY
from generators.torch_source import render_module
from oracles.verdict import Stage

# The harness modules (fuzzer/cases/harness/) of a repro.py that starts from a PyTorch source model, head first.
TORCH_HARNESS = ("head", "torch_tensors", "runtime", "judging", "child", "export", "from_torch")
# Those of a repro.py that starts from the saved upstream.onnx and needs no torch.
UPSTREAM_HARNESS = ("head", "numpy_tensors", "runtime", "judging", "child", "from_upstream")


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


class Converter:
    """Base class: subclasses set the class attributes and implement `convert_impl`. Everything the rest of
    convsmith asks of a converter (which upstreams exist, its cross-checks, its repro.py, its grouping) is read off
    these declarations, never off its name.

    `divergence_stage` is the stage a wrong output is blamed on (the step that changed the model).
    """

    name: ClassVar[str]
    role: ClassVar[Role] = Role.EXPORTER
    framework: ClassVar[str] = "pytorch"  # what its input model is written in ("pytorch", "tensorflow", "onnx")
    runtime: ClassVar[str] = "onnxruntime"  # what its output runs on ("onnxruntime", "pytorch", "tflite", ...)
    # An exporter whose export the ONNX tools can start from (see export_upstream_model), at its options' opsets.
    upstream: ClassVar[bool] = False
    # A converter kept beside a newer one of its role and framework (TorchScript's exporter beside dynamo's): the
    # newer one's name. Where both run, a campaign tests this one on a share of graphs only and draws it less often
    # as the ONNX tools' upstream.
    superseded_by: ClassVar[str] = ""
    # The option naming the ONNX Runtime level its model runs at ("level"): its cross-checks rerun a case at every
    # level, and ONNX Runtime's bisection names the optimizer.
    level_option: ClassVar[str] = ""
    # The Rewrite.tool of pattern operators (generators/ops/patterns.py) whose rewrites this converter records.
    rewrite_tool: ClassVar[str] = ""
    # repro.py: the harness modules of a script that starts from the source model (head first; its model part is
    # rendered for `framework`) and of one that starts from the saved upstream.onnx, the harness functions that take
    # convert_and_run's place in each, and an upstream exporter's function that remakes the model the ONNX tools
    # received.
    source_harness: ClassVar[tuple[str, ...]] = TORCH_HARNESS
    upstream_harness: ClassVar[tuple[str, ...]] = UPSTREAM_HARNESS
    repro_conversion: ClassVar[str] = ""
    repro_upstream_conversion: ClassVar[str] = ""
    repro_upstream_export: ClassVar[str] = ""
    libraries: ClassVar[tuple[str, ...]]  # import names that must work
    distributions: ClassVar[tuple[str, ...]]  # package names whose versions key bug cases and probe caches
    options_type: ClassVar[type[ConverterOptions]]
    divergence_stage: ClassVar[Stage] = Stage.NODE_CONVERSION
    display_name: ClassVar[str] = ""  # what its maintainers call it, for report titles
    # Options added after bug cases were written, with the value such a case ran with (its case.json lacks them).
    older_defaults: ClassVar[Mapping[str, Any]] = {}
    # Whether the model it writes must pass ONNX's checker: False for a tool writing for ONNX Runtime alone
    # (operators ONNX does not define, in ONNX's own domain too), whose model is valid where ONNX Runtime loads it.
    onnx_checked: ClassVar[bool] = True
    # The ONNX Runtime level its target model runs at (a cross-check's AtLevel runs an exporter's at another).
    target_level: ClassVar[str] = "disabled"

    # Its library's documented "not implemented" messages (regular expressions) beside those oracles/taxonomy.py
    # knows for every library: a failure with one is unsupported, counted and never filed.
    unsupported_messages: ClassVar[tuple[str, ...]] = ()
    project: ClassVar[str] = ""  # who maintains it ("PyTorch"): the name of its project ("" uses `name`)
    tracker: ClassVar[str] = ""  # where its maintainers take bug reports
    distribution: ClassVar[str] = ""  # the pip distribution holding its own code (what a bisection installs)

    def expressible(self, op: OpSpec) -> bool:
        """Whether this converter's framework can write operator `op` (a graph with any other is never its test)."""
        return True

    def expresses(self, graph: Graph) -> bool:
        """Whether every operator of `graph` is expressible."""
        return all(self.expressible(REGISTRY[node.op]) for node in graph.nodes)

    def repro_model(self, graph: Graph) -> Mapping[str, str]:
        """The definitions a repro.py that starts from the source model has its model in (name: source), as this
        exporter's framework writes the graph: PyTorch's `Repro` module by default."""
        return {"Repro": render_module(graph)}

    def export_upstream_model(self, source: Source, opset: int, steps: Steps) -> onnx.ModelProto:
        """An upstream exporter's model of `source` at `opset`, as the ONNX tools receive it (failures as
        StageError, each step under its stage in `steps`)."""
        raise NotImplementedError(f"{self.name} exports no upstream model")

    def opsets(self) -> tuple[int, int]:
        """The opsets its options take, lowest and highest."""
        return self.options_type.opset_range

    def default_opset(self) -> int:
        """The opset its default options export at (an upstream's when none is drawn)."""
        return int(self.options_type().to_json().get("opset", self.options_type.opset_range[1]))

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

    def rewrite_view(self, upstream: bytes, site: FaultSite) -> RewriteView | None:
        """The model just before and after the one rewrite `site` blames (a bisected transformer, the one pass that
        shows the bug alone), from the model the converter received; None where no single rewrite is named."""
        return None

    def rewrites_out_of_reach(self, device: str) -> Mapping[str, str]:
        """The listed rewrites no test on `device` can make fire (registered for another execution provider, say),
        each with why: the coverage share leaves them out."""
        return {}

    def rewrites_beyond_float(self) -> frozenset[str]:
        """The listed rewrites that only a quantized or integer graph gives anything to rewrite: the coverage also
        gives its share on float graphs, without them."""
        return frozenset()

    def pass_names(self, options: ConverterOptions) -> tuple[str, ...] | None:
        """The passes the options run, for a converter made of named passes each of which can run alone (the
        diagnosis runs each alone); None for any other converter."""
        return None

    def avoid_settings(self, options: ConverterOptions, hints: Hints) -> tuple[Setting, ...]:
        """The settings a user could change to avoid a bug this converter showed under `options`, cheapest (least
        disruptive) first; `hints` is what the case says of its bug. None by default."""
        return ()

    def trait_setting(self, options: ConverterOptions) -> str:
        """The setting under which this converter's tests count graph and model traits apart (onnx2tf's target:
        a bug of its TFLite model alone), as a short word; "" where none is (the default)."""
        return ""

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
        return ConverterInfo(self.name, ok, reason, self.versions(), self.role.value, self.framework, self.runtime)

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
