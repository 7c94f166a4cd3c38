"""What a converter can do beyond converting, each a small Protocol it opts into by defining the members: the rest of
convsmith asks `isinstance(converter, Capability)` and reads the answer, never a converter's name or class. A
converter without one gets the default the reader states (no snippet, no settings, no rewrites recorded)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnx

from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.culprit import Culprit
from fuzzer.converters.describe import FaultSite, Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.rewrite_view import RewriteView
from fuzzer.converters.setting import Hints, Setting
from generators.ir import Graph
from generators.ops.base import OpSpec
from generators.registry import REGISTRY

Shows = Callable[[tuple[np.ndarray, ...]], bool]  # whether outputs show the bug (a divergence, say)
Runner = Callable[[bytes, Source], tuple[tuple[np.ndarray, ...], tuple[str, ...]]]


@runtime_checkable
class Snippets(Protocol):
    """Its call as a report snippet writes it (see Snippet); an exporter also takes `dynamic`, the dims a dynamic
    export marks."""

    def snippet(self, options: Any) -> Snippet: ...


def snippet_of(converter: object, options: Any, *dynamic: DynamicAxes) -> Snippet | None:
    """`converter`'s snippet under `options` (an exporter's marking `dynamic`), None where it has none."""
    return converter.snippet(options, *dynamic) if isinstance(converter, Snippets) else None


@runtime_checkable
class AvoidsBugs(Protocol):
    """The settings a user could change to avoid a bug it showed under `options`, cheapest (least disruptive)
    first; `hints` is what the case says of its bug (fuzzer/diagnosis/workaround.py tries them)."""

    def avoid_settings(self, options: Any, hints: Hints) -> tuple[Setting, ...]: ...


@runtime_checkable
class ExportsUpstream(Protocol):
    """An exporter whose export the ONNX tools can start from: its model at an opset (failures as StageError, each
    step under its stage in `steps`)."""

    def export_upstream_model(self, source: Source, opset: int, steps: Steps) -> onnx.ModelProto: ...


@runtime_checkable
class Superseded(Protocol):
    """A converter kept beside a newer one of its role and framework (TorchScript's exporter beside dynamo's): where
    both run, a campaign tests this one on a share of graphs only and draws it less often as an upstream."""

    superseded_by: str


def superseded_by(converter: object) -> str:
    """The name of the converter that supersedes `converter`, "" where none does."""
    return converter.superseded_by if isinstance(converter, Superseded) else ""


@runtime_checkable
class Expressing(Protocol):
    """A framework that cannot write every operator: a graph with one it cannot write is never its test."""

    def expressible(self, op: OpSpec) -> bool: ...


def expressible(converter: object, op: OpSpec) -> bool:
    """Whether `converter`'s framework can write `op` (any converter that does not say can)."""
    return converter.expressible(op) if isinstance(converter, Expressing) else True


def expresses(converter: object, graph: Graph) -> bool:
    """Whether `converter`'s framework can write every operator of `graph`."""
    # One isinstance, not one per operator: a runtime-checkable Protocol's costs microseconds, and settings are
    # drawn for every test.
    if not isinstance(converter, Expressing):
        return True
    return all(converter.expressible(REGISTRY[node.op]) for node in graph.nodes)


@runtime_checkable
class RecordsRewrites(Protocol):
    """Rewrite coverage: every rewrite (transformer, pass, rule) the installed library has that its tests record
    as fired (TargetRun.rewrites), read from the library itself."""

    def rewrite_names(self) -> tuple[str, ...]: ...


@runtime_checkable
class RewriteReach(Protocol):
    """The listed rewrites no test can make fire (on `device`: registered for another execution provider, say),
    each with why, and those that only a quantized or integer graph gives anything to rewrite: the coverage share
    leaves the first out and also gives a share on float graphs without the second."""

    def rewrites_out_of_reach(self, device: str) -> Mapping[str, str]: ...

    def rewrites_beyond_float(self) -> frozenset[str]: ...


@runtime_checkable
class ClassReach(Protocol):
    """The edge-case classes (edge_classes.EdgeClass values) none of its rewrites can be seen to meet, each with why
    (its replay reads the main graph only, say): coverage leaves those pairs out of the reachable ones."""

    def classes_out_of_reach(self) -> Mapping[str, str]: ...


def classes_out_of_reach(converter: object) -> Mapping[str, str]:
    """`converter`'s classes out of reach (none for one that does not say)."""
    return converter.classes_out_of_reach() if isinstance(converter, ClassReach) else {}


@runtime_checkable
class PatternRewrites(Protocol):
    """The Rewrite.tool of the pattern operators (generators/ops/patterns.py) whose rewrites it records."""

    rewrite_tool: str


@runtime_checkable
class ShowsRewrite(Protocol):
    """The model just before and after the one rewrite `site` blames (a bisected transformer, the one pass that
    shows the bug alone), from the model it received; None where no single rewrite is named."""

    def rewrite_view(self, upstream: bytes, site: FaultSite) -> RewriteView | None: ...


@runtime_checkable
class PassList(Protocol):
    """A converter made of named passes each of which can run alone (the cross-checks run each alone): the passes
    its options run."""

    def pass_names(self, options: Any) -> tuple[str, ...]: ...


def pass_names(converter: object, options: Any) -> tuple[str, ...] | None:
    """The passes `options` run, for a converter with a PassList; None for any other."""
    return converter.pass_names(options) if isinstance(converter, PassList) else None


@runtime_checkable
class RuntimeOptimizer(Protocol):
    """ONNX Runtime's own optimizer as a converter: its model is the runtime's, its option `level_option` names the
    level, and it bisects its own rewrites to name the one behind a bug."""

    level_option: str

    def bisect(self, source: Source, options: Any, run: TargetRun, shows: Shows) -> Culprit | None:
        """The lowest level whose run `shows` the bug and, where disabling one rewrite alone removes it, that one."""

    def bisect_crash(self, source: Source, options: Any) -> Culprit | None:
        """The same for a crash at graph optimization, which leaves no run to start from."""


@runtime_checkable
class DivergenceLabels(Protocol):
    """A converter that labels a divergence at graph optimization with what runs of its own show (whether its
    reference evaluation diverges too, say)."""

    def divergence_labels(self, source: Source, options: Any, run: TargetRun, shows: Shows) -> tuple[str, ...]:
        """Labels for the verdict of `run`, whose outputs `shows` judged."""


@runtime_checkable
class TraitSetting(Protocol):
    """The setting under which its tests count graph and model traits apart (onnx2tf's target: a bug of its TFLite
    model alone), as a short word; "" where none is."""

    def trait_setting(self, options: Any) -> str: ...


@runtime_checkable
class AtenOps(Protocol):
    """The ATen operators ('aten::name', overloads folded) an exporter from PyTorch translates."""

    def supported_aten_ops(self) -> frozenset[str]: ...


@runtime_checkable
class OwnRuntime(Protocol):
    """How a model it made is run, as the diagnosis examines it (raising StageError), where that is not ONNX Runtime
    with optimizations off."""

    def target_runtime(self) -> Runner: ...
