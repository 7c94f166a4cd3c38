"""The ONNX model an ONNX-to-X converter starts from: an exporter's checked model and its unoptimized run.

Failures here belong to the exporter, not to the converter under test, so they leave as UpstreamError
(check.py files them under Stage.SOURCE, never as this converter's bug).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx

from fuzzer.converters.base import Converter, ConverterOptions, Source, StageError, Steps, TargetRun, UpstreamError
from fuzzer.converters.runtime import check_and_serialize, run_model, run_onnx_target
from fuzzer.converters.torch_onnx_dynamo import DynamoOptions, export_dynamo
from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
from oracles.verdict import Stage

UPSTREAMS = ("torch-onnx-script", "torch-onnx-dynamo")
# Each exporter's opsets and the one it exports at by default.
UPSTREAM_OPSETS = {"torch-onnx-script": ScriptOptions.opset_range, "torch-onnx-dynamo": DynamoOptions.opset_range}
UPSTREAM_DEFAULT_OPSET = {"torch-onnx-script": ScriptOptions().opset, "torch-onnx-dynamo": DynamoOptions().opset}


USUAL_UPSTREAM_SHARE = 2 / 3  # of drawn settings, those starting from the dynamo exporter


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
    def draw(cls, seed: int, pinned: Mapping[str, Any] | None = None) -> ConverterOptions:
        """As ConverterOptions.draw, but the upstream (usually dynamo) and its opset are drawn per graph, not per
        converter: the ONNX tools testing one graph share one export."""
        shared = dict(pinned or {})
        rng = random.Random(f"upstream:{seed}")
        if "upstream" not in shared:  # mostly the exporter torch maintains (torch 2.11 deprecated TorchScript's)
            shared["upstream"] = "torch-onnx-dynamo" if rng.random() < USUAL_UPSTREAM_SHARE else "torch-onnx-script"
        if "opset" not in shared:
            low, high = UPSTREAM_OPSETS[shared["upstream"]]
            default = UPSTREAM_DEFAULT_OPSET[shared["upstream"]]
            shared["opset"] = rng.randint(low, high) if rng.random() >= 0.5 else default
        return super().draw(seed, shared)


@dataclass(frozen=True)
class Upstream:
    """The exported model (proto and bytes) and its outputs under ONNX Runtime with optimizations off."""

    model: onnx.ModelProto
    data: bytes
    outputs: tuple[np.ndarray, ...]
    output_dtypes: tuple[str, ...]


@dataclass(frozen=True)
class _Export:
    """One upstream export of a source as every converter after it sees it: the serialized model and baseline
    run, or the failure. The proto is parsed again for each user, as ONNX passes may change it in place."""

    data: bytes = b""
    outputs: tuple[np.ndarray, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    error: UpstreamError | None = None


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
            source.exports[key] = _Export(up.data, up.outputs, up.output_dtypes)
        except UpstreamError as exc:
            source.exports[key] = _Export(error=exc)
    made: _Export = source.exports[key]
    if made.error is not None:
        raise made.error
    return Upstream(onnx.load_from_string(made.data), made.data, made.outputs, made.output_dtypes)


def cached_upstream(source: Source, exporter: str, opset: int) -> bytes | None:
    """The serialized upstream export already made for `source`, if one was made and succeeded."""
    made = source.exports.get((exporter, opset))
    return made.data if isinstance(made, _Export) and made.error is None else None


def _export(source: Source, exporter: str, opset: int, steps: Steps, run: bool) -> Upstream:
    own = Steps()
    try:
        if exporter == "torch-onnx-script":
            model = export_script(source, ScriptOptions(opset=opset), own)
        else:
            model = export_dynamo(source, DynamoOptions(opset=opset, optimize=True), own)
        data = check_and_serialize(model, own)
        outputs, dtypes = run_model(data, source, own) if run else ((), ())
    except StageError as exc:
        raise UpstreamError(exc.failure, exporter) from exc
    finally:
        for timer, seconds in own.timings.items():
            steps.timings[f"upstream_{timer}"] = seconds
    return Upstream(onnx.load_from_string(data), data, outputs, dtypes)


class OnnxPassConverter(Converter):
    """An ONNX-to-ONNX converter: export upstream, transform (tagged `transform_stage`), check and run the result
    like any target, and judge it against the unconverted model's run (the baseline)."""

    transform_stage: Stage = Stage.GRAPH_OPTIMIZATION
    divergence_stage = Stage.GRAPH_OPTIMIZATION

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        raise NotImplementedError

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps)  # type: ignore[attr-defined]
        with steps.at(self.transform_stage, "transform"):
            model = self.transform(up.model, options)
        run = run_onnx_target(model, source, steps)
        return replace(run, timings=dict(steps.timings), baseline=up.outputs, baseline_model=up.data,
                       baseline_dtypes=up.output_dtypes)
