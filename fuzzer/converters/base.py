"""What a converter is: options, the source it reads, the target run it returns, and stage-tagged failures.

A converter turns a `Source` (the float32 torch module of a graph and its inputs) into a target, runs it and
returns a `TargetRun`. Any failure of the library under test leaves as a `StageError` naming the pipeline
stage; any other exception is a convsmith bug and keeps its traceback. Each converter module imports its
library inside functions, so a missing library makes that converter unavailable and nothing else.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from fuzzer.converters.dynamic import DynamicAxes, leading_axes
from generators.ir import Graph
from generators.materialize import GraphModule
from oracles.taxonomy import Failure
from oracles.verdict import Stage, Symptom


@dataclass(frozen=True)
class ConverterOptions:
    """Base of every converter's options: a frozen dataclass of JSON scalars (they go into bug cases).

    Values are checked when made: a wrong type or an opset outside `opset_range` is a ValueError (bad input),
    never a conversion the converter is blamed for."""

    opset_range: ClassVar[tuple[int, int]] = (7, 23)  # the opsets torch.onnx can export
    choices: ClassVar[Mapping[str, tuple[str, ...]]] = {}  # options that take one of a few names
    # The values a campaign draws an option from, where its choices (or True/False) are not the whole story.
    space: ClassVar[Mapping[str, tuple[Any, ...]]] = {}

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value, default = getattr(self, f.name), f.default
            if default is not dataclasses.MISSING and not _same_kind(value, default):
                raise ValueError(f"option {f.name}={value!r}: expected {type(default).__name__}")
            if f.name == "opset" and not self.opset_range[0] <= value <= self.opset_range[1]:
                low, high = self.opset_range
                raise ValueError(f"option opset={value}: this converter takes opsets {low} to {high}")
            if f.name in self.choices and value not in self.choices[f.name]:
                raise ValueError(f"option {f.name}={value!r}: one of {', '.join(self.choices[f.name])}")

    def to_json(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def draw(cls, seed: int, pinned: Mapping[str, Any] | None = None, graph: Graph | None = None) -> ConverterOptions:
        """Options for the test of `seed`: each keeps its default half the time, else takes a value drawn from its
        real range (`candidates`); `pinned` ones are kept as given. `graph` is the graph under test, for options
        whose range depends on it (an ONNX tool's upstream)."""
        rng = random.Random(f"{cls.__name__}:{seed}")
        values: dict[str, Any] = dict(pinned or {})
        for f in dataclasses.fields(cls):
            if f.name in values:
                continue
            candidates = cls.candidates(f.name, values)
            if candidates and rng.random() >= 0.5:
                values[f.name] = rng.choice(candidates)
            elif f.default is not dataclasses.MISSING:
                values[f.name] = f.default
        return cls.from_json({k: _jsonable(v) for k, v in values.items()})

    @classmethod
    def candidates(cls, name: str, drawn: Mapping[str, Any]) -> tuple[Any, ...]:
        """The values option `name` can take in a campaign, given the ones drawn before it (fields in order)."""
        if name == "opset":
            low, high = cls.opset_range
            return tuple(range(low, high + 1))
        if name in cls.space:
            return tuple(cls.space[name])
        if name in cls.choices:
            return tuple(cls.choices[name])
        default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
        return (True, False) if isinstance(default, bool) else ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConverterOptions:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__} has no option(s) {sorted(unknown)}; known: {sorted(names)}")
        hinted = {f.name: f.type for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) and "tuple" in str(hinted[k]) else v for k, v in data.items()})


def _same_kind(value: Any, default: Any) -> bool:
    """bool is not an int here; a tuple option takes any tuple."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


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

    def __init__(self, failure: Failure, model: bytes | None = None) -> None:
        super().__init__(f"{failure.stage.value}: {failure.exc_type}: {failure.message}")
        self.failure = failure
        self.model = model  # the model the conversion had written when it failed (kept in the case as evidence)


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
            raise StageError(Failure.of(stage, exc), self.model) from exc
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
    rewrites: tuple[str, ...] = ()  # the converter's rewrites that changed the model (Converter.rewrite_names)


class UpstreamError(Exception):
    """The step before the converter under test failed (e.g. the export an ONNX optimizer starts from); `labels`
    and `symptom` (else the failure's class) say more where the failure is not an exception (a disputed baseline)."""

    def __init__(self, failure: Failure, upstream: str, labels: tuple[str, ...] = (),
                 symptom: Symptom | None = None) -> None:
        super().__init__(f"upstream {upstream} failed at {failure.stage.value}: {failure.message}")
        self.failure = failure
        self.upstream = upstream
        self.labels = labels
        self.symptom = symptom


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
    opset = options.opset  # type: ignore[attr-defined]
    if options != type(options)(opset=opset):  # type: ignore[call-arg]
        return convert()
    try:
        run = convert()
    except StageError as exc:
        source.exports.setdefault((exporter, opset), SharedExport(error=UpstreamError(exc.failure, exporter)))
        raise
    if run.model is not None:
        source.exports.setdefault((exporter, opset), SharedExport(run.model, run.outputs, run.output_dtypes))
    return run


@dataclass(frozen=True)
class ConverterInfo:
    """What list_converters reports: name, whether it can run here and why not, library versions."""

    name: str
    available: bool
    reason: str
    versions: Mapping[str, str]


@dataclass(frozen=True)
class Snippet:
    """How a report's few-line snippet calls a converter, as plain Python.

    An exporter's `lines` turn `module` and `inputs` (torch) into the ONNX `model` (a dynamic export's define the
    dims they mark first); an ONNX-to-ONNX converter's turn
    `model` into the converted `model`; `level` is the ONNX Runtime optimization level the target then runs at."""

    imports: tuple[str, ...]
    lines: tuple[str, ...]
    level: str = "disabled"
    from_torch: bool = False


@dataclass(frozen=True)
class Component:
    """The part of a project that must change for a bug to go: what it is called, where it is filed, and a stable key
    for root causes (the converter's name where the converter itself is at fault)."""

    project: str  # "PyTorch", "ONNX Runtime", "onnxoptimizer"
    name: str  # "TorchScript exporter: the symbolic of `floor_divide`"
    tracker: str  # the project's issue tracker ("" when unknown)
    key: str

    def to_json(self) -> dict[str, str]:
        return {"project": self.project, "name": self.name, "tracker": self.tracker, "key": self.key}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Component:
        return cls(str(data["project"]), str(data["name"]), str(data.get("tracker", "")), str(data["key"]))


@dataclass(frozen=True)
class FaultSite:
    """Where a converter's bug showed, as the converter needs it to name its guilty component."""

    stage: Stage
    operator: str  # the operator the root cause is filed under (a graph operator, or an ONNX op type)
    frame_owner: str = ""  # the top-level package of the innermost frame of a crash ("onnxscript", "torch")
    labels: tuple[str, ...] = ()  # the verdict's labels (an ONNX Runtime bisection's "ort-optimizer:<name>")
    options: Mapping[str, Any] = field(default_factory=dict)
    same_bug_passes: tuple[str, ...] = ()  # the passes that show the bug alone (the cross-checks')
    graph_ops: tuple[str, ...] = ()  # the operators of the case's graph

    def named(self) -> str:
        """How a component's name points at the operator: "of `sin`", "that emits ONNX `Not`" (an operator of the
        model the error names), or "of one of `a`, `b` (the error names none)"."""
        if self.operator[:1].isupper():
            return f"that emits ONNX `{self.operator}`"
        if self.operator == "unknown" and self.graph_ops:
            ops = ", ".join(f"`{op}`" for op in dict.fromkeys(self.graph_ops))
            return f"of one of {ops} (the error names none)"
        return f"of `{self.operator}`"


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

    def snippet(self, options: ConverterOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        """The converter's call as a report snippet writes it (see Snippet); an exporter whose `dynamic` option is on
        marks `dynamic` (the case's dims) in it."""
        raise NotImplementedError(f"{self.name} has no report snippet")

    def component(self, site: FaultSite) -> Component:
        """The part of this converter a bug that showed at `site` is in (subclasses name their steps)."""
        return self.own_component(self.display_name or self.name)

    def own_component(self, name: str) -> Component:
        """A component of this converter's own project, keyed by the converter (its root causes stay its own)."""
        return Component(self.project or self.display_name or self.name, name, self.tracker, self.name)

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
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"

