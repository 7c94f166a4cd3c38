"""The ONNX model an ONNX-to-X converter starts from: an exporter's checked model and its unoptimized run, or the
graph materialized straight to ONNX (the "onnx-native" upstream, generators/onnx_native.py).

Failures here belong to the exporter, not to the converter under test, so they leave as UpstreamError
(check.py files them under Stage.SOURCE, never as this converter's bug).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx

from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import SharedExport, Source, StageError, Steps, TargetRun, UpstreamError
from fuzzer.converters.native import NATIVE, native_model, second_opinion
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.runtime import check_and_serialize, run_model, run_onnx_target
from fuzzer.converters.torch_onnx_dynamo import DynamoOptions, export_dynamo
from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
from generators.ir import Graph
from generators.onnx_native import NATIVE_OPSETS, native_opsets
from oracles.verdict import Stage

EXPORTERS = ("torch-onnx-script", "torch-onnx-dynamo")
UPSTREAMS = (*EXPORTERS, NATIVE)
# Each upstream's opsets and the one it starts at by default.
UPSTREAM_OPSETS = {"torch-onnx-script": ScriptOptions.opset_range, "torch-onnx-dynamo": DynamoOptions.opset_range,
                   NATIVE: NATIVE_OPSETS}
# An exporter upstream's opset is drawn as that exporter's own test of the seed draws it (the same share of each
# opset), so that where that test's options are an upstream's, the ONNX tools start from its export (share_export).
EXPORTER_OPTIONS: dict[str, type[ConverterOptions]] = {"torch-onnx-script": ScriptOptions,
                                                       "torch-onnx-dynamo": DynamoOptions}
UPSTREAM_DEFAULT_OPSET = {"torch-onnx-script": ScriptOptions().opset, "torch-onnx-dynamo": DynamoOptions().opset,
                          NATIVE: 17}


USUAL_UPSTREAM_SHARE = 2 / 3  # of drawn exporters, the dynamo exporter
# Of drawn settings for a graph every node of which has an ONNX counterpart, those starting from the native model.
NATIVE_UPSTREAM_SHARE = 0.25
# Of a campaign's seeds (where it runs an ONNX tool), those whose graph is generated from the operators with an ONNX
# counterpart, so that its ONNX tools start from the native model: a random graph of every operator almost never
# consists of such operators alone.
NATIVE_SEED_SHARE = 0.25


def native_seed(seed: int) -> bool:
    """Whether the graph of `seed` is made for the native upstream (NATIVE_SEED_SHARE of seeds, by the seed alone)."""
    return random.Random(f"native:{seed}").random() < NATIVE_SEED_SHARE


def native_choice(graph: Graph, pinned: Mapping[str, Any]) -> dict[str, Any] | None:
    """`pinned` with the native upstream at an opset its model can be written at (the pinned one, else 17 where the
    graph allows it, else the oldest); None when it cannot be written at any."""
    opsets = _native_opsets(graph, pinned)
    if not opsets:
        return None
    default = UPSTREAM_DEFAULT_OPSET[NATIVE]
    return {**pinned, "upstream": NATIVE, "opset": default if default in opsets else opsets[0]}


@dataclass(frozen=True)
class UpstreamOptions(ConverterOptions):
    """Options of a converter that starts from an exporter's model: which exporter, at which of its opsets."""

    choices = {"upstream": UPSTREAMS}
    upstream: str = "torch-onnx-script"
    opset: int = 17

    def __post_init__(self) -> None:
        super().__post_init__()
        low, high = UPSTREAM_OPSETS[self.upstream]
        if not low <= self.opset <= high:
            raise ValueError(f"option opset={self.opset}: the {self.upstream} upstream exports opsets {low} to {high}")

    @classmethod
    def candidates(cls, name: str, drawn: Mapping[str, Any]) -> tuple[Any, ...]:
        if name == "opset":
            low, high = UPSTREAM_OPSETS[drawn.get("upstream", UpstreamOptions.upstream)]
            return tuple(range(low, high + 1))
        return super().candidates(name, drawn)

    @classmethod
    def draw(cls, seed: int, pinned: Mapping[str, Any] | None = None, graph: Graph | None = None) -> ConverterOptions:
        """As ConverterOptions.draw, but the upstream (usually dynamo) and its opset are drawn per graph, not per
        converter: the ONNX tools testing one graph share one export. Given the `graph`, the native model is drawn
        too (a share of the time, only where every node has a counterpart, at an opset where they all do)."""
        shared = dict(pinned or {})
        rng = random.Random(f"upstream:{seed}")
        opsets = _native_opsets(graph, shared)
        if "upstream" not in shared and opsets and rng.random() < NATIVE_UPSTREAM_SHARE:
            shared["upstream"] = NATIVE
        if "upstream" not in shared:  # mostly the exporter torch maintains (torch 2.11 deprecated TorchScript's)
            shared["upstream"] = "torch-onnx-dynamo" if rng.random() < USUAL_UPSTREAM_SHARE else "torch-onnx-script"
        if "opset" not in shared and shared["upstream"] == NATIVE and opsets:
            default = UPSTREAM_DEFAULT_OPSET[NATIVE]
            shared["opset"] = default if default in opsets and rng.random() < 0.5 else rng.choice(opsets)
        if "opset" not in shared:
            shared["opset"] = EXPORTER_OPTIONS[shared["upstream"]].draw(seed).opset  # type: ignore[attr-defined]
        return super().draw(seed, shared)


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
    if exporter not in UPSTREAMS:
        raise ValueError(f"unknown upstream exporter {exporter!r}; known: {UPSTREAMS}")
    if not run:
        return _export(source, exporter, opset, steps, run=False)
    key = (exporter, opset)
    if key not in source.exports:
        try:
            up = _export(source, exporter, opset, steps, run=True)
            source.exports[key] = SharedExport(up.data, up.outputs, up.output_dtypes)
        except UpstreamError as exc:
            source.exports[key] = SharedExport(error=exc)
    made: SharedExport = source.exports[key]
    if made.error is not None:
        raise made.error
    return Upstream(onnx.load_from_string(made.data), made.data, made.outputs, made.output_dtypes)


def cached_upstream(source: Source, exporter: str, opset: int) -> bytes | None:
    """The serialized upstream export already made for `source`, if one was made and succeeded."""
    made = source.exports.get((exporter, opset))
    return made.data if isinstance(made, SharedExport) and made.error is None else None


def _export(source: Source, exporter: str, opset: int, steps: Steps, run: bool) -> Upstream:
    own = Steps()
    try:
        if exporter == NATIVE:
            model = native_model(source, opset, own)
        elif exporter == "torch-onnx-script":
            model = export_script(source, ScriptOptions(opset=opset), own)
        else:
            model = export_dynamo(source, DynamoOptions(opset=opset, optimize=True), own)
        data = check_and_serialize(model, own)
        outputs, dtypes = run_model(data, source, own) if run else ((), ())
        if run and exporter == NATIVE:  # no exporter vouches for a native model: ONNX's reference evaluator does
            second_opinion(model, source, outputs, own)
    except StageError as exc:
        raise UpstreamError(exc.failure, exporter) from exc
    finally:
        for timer, seconds in own.timings.items():
            steps.timings[f"upstream_{timer}"] = seconds
    return Upstream(onnx.load_from_string(data), data, outputs, dtypes)


def starts_upstream(converter: Converter) -> bool:
    """Whether `converter` is an ONNX tool, starting from an upstream model (its options name the upstream)."""
    return issubclass(converter.options_type, UpstreamOptions)


class OnnxPassConverter(Converter):
    """An ONNX-to-ONNX converter: export upstream, transform (tagged `transform_stage`), check and run the result
    like any target, and judge it against the unconverted model's run (the baseline)."""

    transform_stage: Stage = Stage.GRAPH_OPTIMIZATION
    divergence_stage = Stage.GRAPH_OPTIMIZATION

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        raise NotImplementedError

    def fired(self, model: onnx.ModelProto, options: ConverterOptions) -> tuple[str, ...]:
        """The rewrites (Converter.rewrite_names) that change `model` under `options`; () where the tool does not
        say. Run apart from `transform`, which stays the tool's own call."""
        return ()

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps)  # type: ignore[attr-defined]
        with steps.at(self.transform_stage, "transform"):
            model = self.transform(up.model, options)
        run = run_onnx_target(model, source, steps)
        start = time.perf_counter()
        try:
            fired = self.fired(up.model, options)
        except Exception:  # the measurement's own runs failing is no verdict on the tool's call, which passed
            fired = ()
        steps.timings["rewrites"] = time.perf_counter() - start
        return replace(run, timings=dict(steps.timings), baseline=up.outputs, baseline_model=up.data,
                       baseline_dtypes=up.output_dtypes, rewrites=fired)
