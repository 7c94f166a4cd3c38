"""What one conversion reads and returns: the source, the stopwatch and stage tagger, the target run, the
failures it raises, and the exports shared between an exporter's test and the ONNX tools that start from it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fuzzer.converters.dynamic import DynamicAxes, leading_axes
from fuzzer.converters.options import ConverterOptions
from fuzzer.support.device import float32_without_tf32
from generators.ir import Graph
from generators.materialize import GraphModule
from oracles.taxonomy import Failure
from oracles.verdict import Stage, Symptom


@dataclass(frozen=True)
class Source:
    """The source model of one check: graph, float32 module (weights settled by the input search), inputs."""

    graph: Graph
    module: GraphModule
    inputs: tuple[torch.Tensor, ...]  # in graph.inputs order, on `device`
    device: str = "cpu"  # where the module and inputs live; ONNX Runtime targets run there too
    # The dims an exporter whose `dynamic` option is on marks dynamic (set by the check; None: leading-dim hints).
    dynamic: DynamicAxes | None = None
    # Upstream exports by (exporter, opset), made once and shared by the ONNX-to-ONNX converters of this source.
    exports: dict[tuple[str, int], Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def on(cls, device: str, graph: Graph, module: GraphModule, inputs: tuple[torch.Tensor, ...]) -> Source:
        """A source whose module and inputs (made on the CPU) are moved to `device`."""
        if device != "cpu":
            float32_without_tf32()
            module, inputs = module.to(device), tuple(x.to(device) for x in inputs)
        return cls(graph, module, inputs, device)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(self.graph.inputs)

    def dynamic_axes(self) -> DynamicAxes:
        """The dims a dynamic export marks: those the check set, else the inputs' leading dims as hints."""
        return self.dynamic if self.dynamic is not None else leading_axes(self.graph)

    @property
    def output_dtypes(self) -> tuple[str, ...]:
        return tuple(self.graph.types[n].dtype.value for n in self.graph.outputs)


class StageError(Exception):
    """Raised by converters: the library under test failed at `failure.stage`."""

    def __init__(self, failure: Failure, model: bytes | None = None, timings: Mapping[str, float] | None = None
                 ) -> None:
        super().__init__(f"{failure.stage.value}: {failure.exc_type}: {failure.message}")
        self.failure = failure
        self.model = model  # the model the conversion had written when it failed (kept in the case as evidence)
        # The failed conversion's steps, the failing one included (Steps.at adds its time on the way out), so that
        # a failed test's time is booked where it went.
        self.timings: Mapping[str, float] = timings if timings is not None else {}


@dataclass
class Steps:
    """One conversion's stopwatch and failure tagger: `with steps.at(Stage.X, "timer"):` around library calls.

    Keep each block tight around calls into the library under test: whatever raises inside is blamed on it.
    """

    timings: dict[str, float] = field(default_factory=dict)
    model: bytes | None = None  # the last model this conversion serialized: a later failure keeps it

    @contextmanager
    def at(self, stage: Stage, timer: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        except StageError:
            raise
        except Exception as exc:  # the library under test failed; KeyboardInterrupt passes through
            raise StageError(Failure.of(stage, exc), self.model, self.timings) from exc
        finally:
            self.timings[timer] = self.timings.get(timer, 0.0) + time.perf_counter() - start


@dataclass(frozen=True)
class TargetRun:
    """A converted model's outputs (graph.outputs order) and how they should be judged.

    `outputs` hold numpy arrays (bfloat16 in float32 storage); `output_dtypes` are the IR dtype names the
    target declared. `baseline` is what the target is compared with when it is not the eager source (ONNX to
    ONNX converters compare with the unconverted ONNX model); a baseline failure is the source's, not ours.
    """

    outputs: tuple[np.ndarray, ...]
    output_dtypes: tuple[str, ...]
    timings: Mapping[str, float]
    model: bytes | None = None  # the serialized target ONNX model, where there is one
    baseline: tuple[np.ndarray, ...] | None = None
    baseline_model: bytes | None = None
    baseline_dtypes: tuple[str, ...] | None = None  # what the unconverted model declared
    rewrites: tuple[str, ...] = ()  # the converter's rewrites that changed the model (capabilities.RecordsRewrites)
    # Per rewrite fired, the edge-case classes of what it matched (edge_classes.py), by name.
    rewrite_classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The float64 answer the error is measured from, where the baseline comes from another framework than the graph's
    # PyTorch module (TensorFlow's float64 twin of a TensorFlow model); None: the source's float64 twin.
    reference: tuple[np.ndarray, ...] | None = None
    # The float dtypes the target computes in a narrower one, by design or by a setting (OpenVINO's CPU plugin computes
    # float64 in float32, and float32 in bfloat16 under a bf16 precision hint): judged at the narrower one's tolerance.
    computed_in: Mapping[str, str] = field(default_factory=dict)


class UpstreamError(Exception):
    """The step before the converter under test failed (e.g. the export an ONNX optimizer starts from); `labels`
    and `symptom` (else the failure's class) say more where the failure is not an exception (a disputed baseline)."""

    def __init__(self, failure: Failure, upstream: str, labels: tuple[str, ...] = (),
                 symptom: Symptom | None = None, timings: Mapping[str, float] | None = None,
                 unrunnable: bytes | None = None) -> None:
        super().__init__(f"upstream {upstream} failed at {failure.stage.value}: {failure.message}")
        self.failure = failure
        self.upstream = upstream
        self.labels = labels
        self.symptom = symptom
        self.timings: Mapping[str, float] = timings if timings is not None else {}  # the test's steps, as StageError's
        # The upstream model, valid, where only ONNX Runtime's loading it failed (unrunnable_model): an ONNX tool can
        # still be given it, and its own crash or invalid model told, though no values can be judged.
        self.unrunnable = unrunnable

    def again(self, timings: Mapping[str, float], labels: tuple[str, ...] = ()) -> UpstreamError:
        """The same failure, raised again in another test with that test's `timings` (and `labels` added)."""
        return UpstreamError(self.failure, self.upstream, (*self.labels, *labels), self.symptom, dict(timings),
                             self.unrunnable)


def unrunnable_model(exc: StageError) -> bytes | None:
    """The model a conversion wrote and validated, where ONNX Runtime failed only to load it (a kernel it lacks)."""
    return exc.model if exc.failure.stage is Stage.RUNTIME_LOAD else None


@dataclass(frozen=True)
class SharedExport:
    """One upstream export of a source as every converter after it sees it: the serialized model and its run
    (optimizations off), or the failure. The proto is parsed again for each user, as ONNX passes may change it in
    place."""

    data: bytes = b""
    outputs: tuple[np.ndarray, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    error: UpstreamError | None = None


def share_export(source: Source, exporter: str, options: ConverterOptions, convert: Callable[[], TargetRun]
                 ) -> TargetRun:
    """An exporter's own test (`convert`); where its options are those of an upstream export (the defaults but the
    opset), its model, run or failure is kept in `source.exports` for the ONNX tools that start from that exporter at
    that opset: a dynamo export takes half a second, and the unit's exporter tests run before its ONNX tools. Only
    written here: the exporter's rerun exports again."""
    data = options.to_json()
    opset = int(data["opset"])
    if data != {**type(options)().to_json(), "opset": opset}:
        return convert()
    try:
        run = convert()
    except StageError as exc:
        error = UpstreamError(exc.failure, exporter, unrunnable=unrunnable_model(exc))
        source.exports.setdefault((exporter, opset), SharedExport(error=error))
        raise
    if run.model is not None:
        source.exports.setdefault((exporter, opset), SharedExport(run.model, run.outputs, run.output_dtypes))
    return run
