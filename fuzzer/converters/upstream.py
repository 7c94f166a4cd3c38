"""The ONNX model an ONNX-to-X converter starts from: an exporter's checked model and its unoptimized run, or the
graph materialized straight to ONNX (the "onnx-native" upstream, generators/onnx_native.py).

Failures here belong to the exporter, not to the converter under test, so they leave as UpstreamError
(check.py files them under Stage.SOURCE, never as this converter's bug).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Self, TypeVar

import numpy as np
import onnx

from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import ExportsUpstream, Expressing, expresses, superseded_by
from fuzzer.converters.conversion import (
    SharedExport,
    Source,
    StageError,
    Steps,
    TargetRun,
    UpstreamError,
    unrunnable_model,
)
from fuzzer.converters.native import NATIVE, native_model, second_opinion
from fuzzer.converters.options import ConverterOptions, default_opset
from fuzzer.converters.registry import default_registry
from fuzzer.converters.rewrite_matches import Fired, attributed
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import check_and_serialize, declared_input_names, run_model, run_onnx_target
from generators.ir import Graph
from generators.onnx_native import NATIVE_OPSETS, native_opsets
from generators.registry import REGISTRY
from oracles.taxonomy import lacks_kernel
from oracles.verdict import Stage

NATIVE_DEFAULT_OPSET = 17
# Of a drawn exporter upstream, the weight of one superseded by another (capabilities.Superseded) against one not:
# of the two torch.onnx exporters, dynamo is drawn two times in three (torch 2.11 deprecated TorchScript's).
SUPERSEDED_WEIGHT = 0.5
# Of drawn settings for a graph every node of which has an ONNX counterpart, those starting from the native model.
NATIVE_UPSTREAM_SHARE = 0.25
# Of a campaign's seeds (where it runs an ONNX tool), those whose graph is generated from the operators with an ONNX
# counterpart, so that its ONNX tools start from the native model: a random graph of every operator almost never
# consists of such operators alone.
NATIVE_SEED_SHARE = 0.25


def upstream_exporters() -> tuple[Converter, ...]:
    """The registered exporters an ONNX tool can start from (capabilities.ExportsUpstream), read from the registry when
    called: the registry imports this module."""
    return default_registry().upstreams()


def upstream_names() -> tuple[str, ...]:
    """Every upstream an ONNX tool's options can name: the upstream exporters, then the native model."""
    return (*(c.name for c in upstream_exporters()), NATIVE)


def upstream_opsets(upstream: str) -> tuple[int, int]:
    """The opsets `upstream` can export, lowest and highest (ValueError for an unknown upstream)."""
    return NATIVE_OPSETS if upstream == NATIVE else _upstream_exporter(upstream).options_type.opset_range


def upstream_default_opset(upstream: str) -> int:
    """The opset `upstream` exports at when none is asked for."""
    return NATIVE_DEFAULT_OPSET if upstream == NATIVE else default_opset(_upstream_exporter(upstream).options_type)


def _exporting(converter: Converter) -> ExportsUpstream:
    if not isinstance(converter, ExportsUpstream):
        raise TypeError(f"{converter.name} exports no upstream model")
    return converter


def _upstream_exporter(name: str) -> Converter:
    found = {c.name: c for c in upstream_exporters()}
    if name not in found:
        raise ValueError(f"unknown upstream exporter {name!r}; known: {upstream_names()}")
    return found[name]


def draw_exporter(rng: random.Random, graph: Graph | None = None) -> str:
    """An upstream exporter drawn with one `rng.random()`: the current ones first, each of weight 1, then the
    superseded ones, each of weight SUPERSEDED_WEIGHT; given the `graph`, among those that can express it (all where
    none can: the test is then skipped as inexpressible)."""
    exporters = upstream_exporters()
    able = [c for c in exporters if expresses(c, graph)] if graph is not None else \
        [c for c in exporters if expresses_every_operator(c)]
    able = able or list(exporters)
    ordered = sorted(able, key=superseded)
    weights = [SUPERSEDED_WEIGHT if superseded(c) else 1.0 for c in ordered]
    at, point = 0.0, rng.random() * sum(weights)
    for converter, weight in zip(ordered, weights, strict=True):
        at += weight
        if point < at:
            return converter.name
    return ordered[-1].name


def expresses_every_operator(exporter: Converter) -> bool:
    """Whether `exporter` can write a graph of any operators: without a graph to ask about, only such an exporter is
    drawn (tf2onnx is drawn for graphs it can express)."""
    return not isinstance(exporter, Expressing) or all(exporter.expressible(op) for op in REGISTRY.values())


def superseded(converter: Converter) -> bool:
    """Whether a newer converter of its role and framework supersedes `converter` (capabilities.Superseded)."""
    return bool(superseded_by(converter))


def native_seed(seed: int) -> bool:
    """Whether the graph of `seed` is made for the native upstream (NATIVE_SEED_SHARE of seeds, by the seed alone)."""
    return random.Random(f"native:{seed}").random() < NATIVE_SEED_SHARE


def native_choice(graph: Graph, pinned: Mapping[str, Any]) -> dict[str, Any] | None:
    """`pinned` with the native upstream at an opset its model can be written at (the pinned one, else 17 where the
    graph allows it, else the oldest); None when it cannot be written at any."""
    opsets = _native_opsets(graph, pinned)
    if not opsets:
        return None
    default = NATIVE_DEFAULT_OPSET
    return {**pinned, "upstream": NATIVE, "opset": default if default in opsets else opsets[0]}


class UpstreamChoices(Mapping[str, tuple[str, ...]]):
    """An ONNX tool's option choices: "upstream" read off the registry when asked (the registry imports the tools'
    modules, so their choices cannot be a table made at import), and `fixed` ones as given."""

    def __init__(self, **fixed: tuple[str, ...]) -> None:
        self._fixed = dict(fixed)

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return upstream_names() if name == "upstream" else self._fixed[name]

    def __iter__(self) -> Iterator[str]:
        return iter(("upstream", *self._fixed))

    def __len__(self) -> int:
        return 1 + len(self._fixed)


@dataclass(frozen=True)
class UpstreamOptions(ConverterOptions):
    """Options of a converter that starts from an exporter's model: which exporter, at which of its opsets."""

    choices = UpstreamChoices()
    upstream: str = "torch-onnx-script"
    opset: int = 17

    def __post_init__(self) -> None:
        super().__post_init__()
        low, high = upstream_opsets(self.upstream)
        if not low <= self.opset <= high:
            raise ValueError(f"option opset={self.opset}: the {self.upstream} upstream exports opsets {low} to {high}")

    @classmethod
    def candidates(cls, name: str, drawn: Mapping[str, Any]) -> tuple[Any, ...]:
        if name == "opset":
            low, high = upstream_opsets(drawn.get("upstream", UpstreamOptions.upstream))
            return tuple(range(low, high + 1))
        return super().candidates(name, drawn)

    @classmethod
    def draw(cls, seed: int, pinned: Mapping[str, Any] | None = None, graph: Graph | None = None) -> Self:
        """As ConverterOptions.draw, but the upstream (usually dynamo) and its opset are drawn per graph, not per
        converter: the ONNX tools testing one graph share one export. Given the `graph`, the native model is drawn
        too (a share of the time, only where every node has a counterpart, at an opset where they all do)."""
        shared = dict(pinned or {})
        rng = random.Random(f"upstream:{seed}")
        opsets = _native_opsets(graph, shared)
        if "upstream" not in shared and opsets and rng.random() < NATIVE_UPSTREAM_SHARE:
            shared["upstream"] = NATIVE
        if "upstream" not in shared:  # mostly the exporters not superseded by another
            shared["upstream"] = draw_exporter(rng, graph)
        if "opset" not in shared and shared["upstream"] == NATIVE and opsets:
            default = NATIVE_DEFAULT_OPSET
            shared["opset"] = default if default in opsets and rng.random() < 0.5 else rng.choice(opsets)
        if "opset" not in shared:
            exporter = _upstream_exporter(shared["upstream"])
            shared["opset"] = exporter.options_type.draw(seed).to_json()["opset"]
        return super().draw(seed, shared)


UpstreamOptionsT = TypeVar("UpstreamOptionsT", bound=UpstreamOptions)


def _native_opsets(graph: Graph | None, pinned: Mapping[str, Any]) -> tuple[int, ...]:
    """The opsets a native model of `graph` can be written at, as far as the pinned options allow (none without a
    graph, or with an exporter pinned)."""
    if graph is None or pinned.get("upstream", NATIVE) != NATIVE:
        return ()
    return tuple(o for o in native_opsets(graph) if pinned.get("opset", o) == o)


@dataclass(frozen=True)
class Upstream:
    """The exported model (proto and bytes) and its outputs under ONNX Runtime with optimizations off."""

    model: onnx.ModelProto
    data: bytes
    outputs: tuple[np.ndarray, ...]
    output_dtypes: tuple[str, ...]


def export_upstream(source: Source, exporter: str, opset: int, steps: Steps, run: bool = True) -> Upstream:
    """Export with `exporter` at `opset`, validate, and (when `run`) run it unoptimized as the baseline.

    With `run`, the export is made once per source and shared (its steps are timed where it was made): the
    exporters are deterministic, and five ONNX-to-ONNX converters used to export the same graph five times."""
    if exporter not in upstream_names():
        raise ValueError(f"unknown upstream exporter {exporter!r}; known: {upstream_names()}")
    if not run:
        return _export(source, exporter, opset, steps, run=False)
    key = (exporter, opset)
    if key not in source.exports:
        try:
            up = _export(source, exporter, opset, steps, run=True)
            source.exports[key] = SharedExport(up.data, up.outputs, up.output_dtypes)
        except UpstreamError as exc:  # shared as made; this test, which made it, also books its time
            source.exports[key] = SharedExport(error=exc)
            raise exc.again(steps.timings) from exc
    made: SharedExport = source.exports[key]
    if made.error is not None:
        raise made.error
    return Upstream(onnx.load_from_string(made.data), made.data, made.outputs, made.output_dtypes)


def cached_upstream(source: Source, exporter: str, opset: int, runnable: bool = True) -> bytes | None:
    """The serialized upstream export already made for `source`, if one was made and succeeded; or, unless
    `runnable`, made valid but not loadable by ONNX Runtime (UpstreamError.unrunnable)."""
    made = source.exports.get((exporter, opset))
    if not isinstance(made, SharedExport):
        return None
    if made.error is None:
        return made.data
    return None if runnable else made.error.unrunnable


def _export(source: Source, exporter: str, opset: int, steps: Steps, run: bool) -> Upstream:
    own = Steps()
    try:
        if exporter == NATIVE:
            model = native_model(source, opset, own)
        else:
            model = _exporting(_upstream_exporter(exporter)).export_upstream_model(source, opset, own)
        data = check_and_serialize(model, own)
        outputs, dtypes = run_model(data, source, own) if run else ((), ())
        if run and exporter == NATIVE:  # no exporter vouches for a native model: ONNX's reference evaluator does
            second_opinion(model, source, outputs, own)
    except StageError as exc:
        raise UpstreamError(exc.failure, exporter, unrunnable=unrunnable_model(exc) if run else None) from exc
    finally:
        for timer, seconds in own.timings.items():
            steps.timings[f"upstream_{timer}"] = seconds
    return Upstream(onnx.load_from_string(data), data, outputs, dtypes)


# The label of an ONNX tool's test whose upstream model ONNX Runtime cannot load: the tool ran on it and wrote a
# valid model, whose values no run can judge.
TRANSFORMED_UNRUN = "transformed-unrun"


def starts_upstream(converter: Converter) -> bool:
    """Whether `converter` starts from an upstream model (an ONNX tool or importer: its options name the upstream)."""
    return converter.role.starts_upstream


class OnnxPassConverter(Converter[UpstreamOptionsT]):
    """An ONNX-to-ONNX converter: export upstream, transform (tagged `transform_stage`), check and run the result
    like any target, and judge it against the unconverted model's run (the baseline)."""

    role = Role.ONNX_TOOL
    framework = "onnx"
    runtime = "onnxruntime"
    repro_conversion = "transform_export"
    repro_upstream_conversion = "transform_upstream"
    transform_stage: Stage = Stage.GRAPH_OPTIMIZATION
    divergence_stage = Stage.GRAPH_OPTIMIZATION

    def transform(self, model: onnx.ModelProto, options: UpstreamOptionsT) -> onnx.ModelProto:
        raise NotImplementedError

    def transform_unrunnable(self, data: bytes, options: UpstreamOptionsT, steps: Steps) -> bool:
        """The tool on an upstream model ONNX Runtime cannot load: its crash or an invalid model it writes is its bug
        (StageError); False where it failed running ONNX Runtime itself on a node with no kernel, which is not."""
        try:
            with steps.at(self.transform_stage, "transform"):
                model = self.transform(onnx.load_from_string(data), options)
        except StageError as exc:
            if lacks_kernel(exc.failure.message):  # passed on by a tool that runs ONNX Runtime (onnxsim folding)
                return False
            raise
        check_and_serialize(model, steps, self.onnx_checked)
        return True

    def fired(self, model: onnx.ModelProto, options: UpstreamOptionsT) -> tuple[str, ...]:
        """The rewrites (capabilities.RecordsRewrites) that change `model` under `options`; () where the tool does not
        say. Run apart from `transform`, which stays the tool's own call."""
        return ()

    def fired_rewrites(self, received: onnx.ModelProto, made: onnx.ModelProto, options: UpstreamOptionsT,
                       watched: tuple[str, ...] | None) -> Fired:
        """The rewrites that fired (`watched` where the tool's own call told them, else `fired`), each with the
        classes of what it matched: here those of everything the call changed (rewrite_matches.attributed); a tool that
        replays its rewrites one at a time gives each its own."""
        return attributed(watched if watched is not None else self.fired(received, options), received, made)

    def transform_watched(self, model: onnx.ModelProto, options: UpstreamOptionsT) -> tuple[
            onnx.ModelProto, tuple[str, ...] | None]:
        """`transform`, and the rewrites it fired where watching the tool's own call tells them without a second
        run; None where `fired` runs apart."""
        return self.transform(model, options), None

    def convert_impl(self, source: Source, options: UpstreamOptionsT) -> TargetRun:
        steps = Steps()
        try:
            up = export_upstream(source, options.upstream, options.opset, steps)
        except UpstreamError as exc:
            if exc.unrunnable is None:
                raise
            transformed = self.transform_unrunnable(exc.unrunnable, options, steps)
            raise exc.again(steps.timings, (TRANSFORMED_UNRUN,) if transformed else ()) from exc
        with steps.at(self.transform_stage, "transform"):
            model, watched = self.transform_watched(up.model, options)
        run = run_onnx_target(model, source, steps, self.onnx_checked, declared_input_names(up.model, source))
        start = time.perf_counter()
        try:
            fired = self.fired_rewrites(up.model, model, options, watched)
        except Exception:  # the measurement's own runs failing is no verdict on the tool's call, which passed
            fired = Fired()
        steps.timings["rewrites"] = time.perf_counter() - start
        return replace(run, timings=dict(steps.timings), baseline=up.outputs, baseline_model=up.data,
                       baseline_dtypes=up.output_dtypes, rewrites=fired.names, rewrite_classes=fired.classes)
