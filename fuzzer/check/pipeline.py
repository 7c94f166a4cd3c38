"""The per-graph check: graph + seed -> source and float64 reference -> converter -> oracle -> Verdict.

Failures of the library under test become verdicts tagged with their stage; failures of the source model
are Stage.SOURCE (never a converter bug); anything else is a convsmith bug and raises with its traceback.
A divergence is rerun once (flaky when the runs disagree), labelled with the discontinuities its inputs
touch, and located: the first graph prefix that diverges names the operator and dtype of the signature.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import (
    Converter,
    ConverterOptions,
    Failure,
    Source,
    StageError,
    Steps,
    TargetRun,
    UpstreamError,
    failure_of,
    tensor_to_numpy,
)
from fuzzer.converters.runtime import run_onnx_target
from generators.ir import Graph
from generators.materialize import GraphModule, float64_twin, materialize, widen_inputs
from generators.valid_inputs import find_valid_inputs
from oracles.blame import BlameResult, blame_output
from oracles.compare import OutputComparison, Reason, compare
from oracles.discontinuity import labels_for, output_labels
from oracles.rerun import check_rerun, mark_flaky
from oracles.signature import crash_signature, wrong_value_signature
from oracles.verdict import Stage, Symptom, Verdict, symptom_of

DIVERGENCES = (Symptom.WRONG_VALUES, Symptom.WRONG_SHAPE, Symptom.WRONG_DTYPE)
INVALID_INPUTS = "invalid-inputs"  # the input search found no NaN/Inf-free inputs: treat values with care

# Documented "not implemented" messages of the libraries under test: counted as unsupported, never bugs.
UNSUPPORTED_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"Could not find an implementation for",  # ORT NOT_IMPLEMENTED kernel lookup
    r"\bNOT_IMPLEMENTED\b",
    r"Unsupported: ONNX export of",  # TorchScript exporter symbolic_helper
    r"does NOT support exporting",  # TorchScript exporter symbolic_opset*: "... for non-boolean input values"
    r"is not supported",  # "Exporting the operator 'aten::x' to ONNX opset version N is not supported"
    r"No ONNX function found for",  # dynamo exporter: torchlib has no translation
    r"no (?:registered )?decomposition",
    r"No Adapter (?:From|To|For)",  # onnx.version_converter
    r"not implemented for",  # kernels missing for a dtype ("... not implemented for 'Half'")
))
UNSUPPORTED_TYPES = ("UnsupportedOperatorError",)


@dataclass(frozen=True)
class CheckOptions:
    """Pipeline knobs (not converter options)."""

    rerun: bool = True  # rerun a divergence once to tell flaky from stable
    locate: bool = True  # bisect graph prefixes for the first diverging operator
    culprit: bool = True  # let the converter name a guilty pass (ort-optimizer)
    input_budget_s: float = 1.0


@dataclass(frozen=True)
class Expected:
    """What the target is judged against: eager float32 outputs and the float64 reference, as numpy."""

    source: Source
    eager: tuple[np.ndarray, ...]
    reference: tuple[np.ndarray, ...]
    valid_inputs: bool = True


@dataclass(frozen=True)
class CheckResult:
    """A verdict plus what a bug case needs: per-stage timings, the target run, the failure traceback."""

    verdict: Verdict
    timings: Mapping[str, float]
    expected: Expected | None = None
    target: TargetRun | None = None
    failure: Failure | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


# ---- public entry points ------------------------------------------------------------------------------

def check_graph(graph: Graph, seed: int, converter_name: str,
                options: ConverterOptions | Mapping[str, Any] | None = None) -> Verdict:
    """The verdict of one graph under one converter (see run_check for timings and artifacts)."""
    return run_check(graph, seed, converter_name, options).verdict


def run_check(graph: Graph, seed: int, converter_name: str,
              options: ConverterOptions | Mapping[str, Any] | None = None,
              check_options: CheckOptions = CheckOptions(), device: str = "cpu") -> CheckResult:
    """The verdict of one graph under one converter, with timings and artifacts; the source and ONNX Runtime run
    on `device` (cpu or cuda)."""
    converter = available_converter(converter_name)
    opts = converter.options(options)
    timings: dict[str, float] = {}
    prepared = prepare(graph, seed, converter.name, timings, check_options.input_budget_s, device)
    if isinstance(prepared, CheckResult):
        return dataclasses.replace(prepared, options=opts.to_json())
    result = judge(prepared, converter, opts, timings)
    result = follow_up(result, converter, opts, check_options)
    return dataclasses.replace(result, options=opts.to_json())


def check_source(source: Source, converter_name: str, options: ConverterOptions | None = None,
                 check_options: CheckOptions = CheckOptions()) -> CheckResult:
    """Like run_check, for a source whose module and inputs are already settled (reducer, prefixes)."""
    converter = available_converter(converter_name)
    opts = converter.options(options)
    timings: dict[str, float] = {}
    expected = expect(source, timings)
    if isinstance(expected, CheckResult):
        return expected
    return follow_up(judge(expected, converter, opts, timings), converter, opts, check_options)


class ConverterUnavailable(RuntimeError):
    """The converter's library does not import here; the message says why (a user-facing, one-line error)."""


def available_converter(name: str) -> Converter:
    converter = CONVERTERS[name]
    ok, reason = converter.availability()
    if not ok:
        raise ConverterUnavailable(f"converter {name} is unavailable: {reason}")
    return converter


# ---- the source side ------------------------------------------------------------------------------------

@contextmanager
def timer(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start


def prepare(graph: Graph, seed: int, converter: str, timings: dict[str, float],
            budget_s: float, device: str = "cpu") -> Expected | CheckResult:
    """Materialize, search inputs (which may settle weights, so before the twin), run eager and float64.

    The search runs on the CPU (seeded, so the same inputs everywhere); the module and inputs then move to
    `device`, where the eager and float64 runs happen."""
    with timer(timings, "materialize"):
        module = materialize(graph, seed)
    with timer(timings, "inputs"):
        found = find_valid_inputs(module, seed, budget_s=budget_s)
    source = Source.on(device, graph, module, tuple(found.inputs[n] for n in graph.inputs))
    expected = expect(source, timings, converter)
    if isinstance(expected, Expected) and not found.valid:
        expected = dataclasses.replace(expected, valid_inputs=False)
    return expected


def expect(source: Source, timings: dict[str, float], converter: str = "source") -> Expected | CheckResult:
    """Eager and float64 runs; a raising source is Stage.SOURCE, not the converter's fault."""
    try:
        with timer(timings, "source"):
            eager = source.module(*source.inputs)
        with timer(timings, "reference"):
            reference = float64_twin(source.module)(*widen_inputs(source.inputs))
    except Exception as exc:  # the eager model itself failed on these inputs
        failure = failure_of(Stage.SOURCE, exc)
        return CheckResult(failure_verdict(converter, failure), timings, failure=failure)
    return Expected(source, _numpy(eager), tuple(r.detach().cpu().numpy() for r in reference))


def _numpy(outputs: Sequence[Any]) -> tuple[np.ndarray, ...]:
    return tuple(tensor_to_numpy(x)[0] for x in outputs)


# ---- converter and oracle -----------------------------------------------------------------------------

def judge(expected: Expected, converter: Converter, options: ConverterOptions,
          timings: dict[str, float]) -> CheckResult:
    """Run the converter once and turn its outcome into a verdict (no rerun, no locating)."""
    return _judge_run(expected, converter, lambda: converter.convert(expected.source, options), timings)


def check_onnx_model(model: onnx.ModelProto | bytes, expected: Expected,
                     converter_name: str = "torch-onnx-script") -> CheckResult:
    """Judge a given ONNX model as if `converter_name` had produced it (fault injection, saved cases)."""
    converter = CONVERTERS[converter_name]
    return _judge_run(expected, converter, lambda: run_onnx_target(model, expected.source, Steps()), {})


def _judge_run(expected: Expected, converter: Converter, produce: Callable[[], TargetRun],
               timings: dict[str, float]) -> CheckResult:
    try:
        run = produce()
    except StageError as exc:
        return CheckResult(failure_verdict(converter.name, exc.failure), timings, expected, failure=exc.failure)
    except UpstreamError as exc:
        verdict = upstream_verdict(converter.name, exc)
        return CheckResult(verdict, timings, expected, failure=exc.failure)
    timings.update(run.timings)
    with timer(timings, "oracle"):
        verdict = oracle(expected, run, converter)
    return CheckResult(verdict, timings, expected, target=run)


def classify(failure: Failure) -> Symptom:
    """Unsupported when a documented not-implemented message; invalid model when validation or load refuses."""
    if failure.exc_type.endswith(UNSUPPORTED_TYPES) or any(p.search(failure.message) for p in UNSUPPORTED_PATTERNS):
        return Symptom.UNSUPPORTED
    if failure.exc_type.endswith("MemoryError"):
        return Symptom.OUT_OF_MEMORY
    if failure.stage in (Stage.VALIDATION, Stage.RUNTIME_LOAD):
        return Symptom.INVALID_MODEL
    return Symptom.CRASH


def failure_verdict(converter: str, failure: Failure) -> Verdict:
    signature = crash_signature(converter, failure.stage, failure.exc_type, failure.message, failure.frame)
    return Verdict(classify(failure), failure.stage, converter, signature=signature,
                   message=f"{failure.exc_type}: {failure.message}"[:2000])


def upstream_verdict(converter: str, exc: UpstreamError) -> Verdict:
    """The exporter this converter starts from failed: the source's problem (unsupported stays unsupported)."""
    symptom = classify(exc.failure)
    f = exc.failure
    signature = crash_signature(f"{converter}<-{exc.upstream}", f.stage, f.exc_type, f.message, f.frame)
    return Verdict(symptom, Stage.SOURCE, converter, signature=signature,
                   message=f"upstream {exc.upstream} failed at {f.stage.value}: {f.exc_type}: {f.message}"[:2000],
                   labels=(f"upstream:{exc.upstream}",))


def oracle(expected: Expected, run: TargetRun, converter: Converter) -> Verdict:
    """Shape and dtype exactly; values only when blame says the target is measurably farther from float64."""
    name, dtypes = converter.name, expected.source.output_dtypes
    baseline = run.baseline if run.baseline is not None else expected.eager
    if len(run.outputs) != len(dtypes):
        return _divergence(expected, converter, Symptom.WRONG_SHAPE, (), None,
                           f"target has {len(run.outputs)} outputs, the graph {len(dtypes)}")
    if run.baseline is not None and not _matches_graph(baseline, run.baseline_dtypes, expected.eager, dtypes):
        return Verdict(Symptom.WRONG_SHAPE, Stage.SOURCE, name, message="the unconverted model's outputs do not "
                       "have the graph's shapes and dtypes: the exporter's bug, not this converter's")
    rows = zip(run.outputs, run.output_dtypes, baseline, dtypes, strict=True)
    metrics = tuple(_compare(a, d, b, t) for a, d, b, t in rows)
    symptom = symptom_of(metrics)
    if symptom is Symptom.PASS:
        return _labelled(Verdict(Symptom.PASS, Stage.NONE, name, metrics), expected)
    failing = [i for i, m in enumerate(metrics) if not m.ok]
    if symptom is not Symptom.WRONG_VALUES:
        return _divergence(expected, converter, symptom, metrics, failing[0], f"{symptom.json_name} at output "
                           f"{expected.source.graph.outputs[failing[0]]}")
    blames = {i: blame_output(baseline[i], run.outputs[i], expected.reference[i], dtypes[i]) for i in failing}
    blamed = [i for i in failing if blames[i].blamed]
    if not blamed:
        reasons = sorted({f"not-blamed:{b.reason}" for b in blames.values()})
        return _labelled(Verdict(Symptom.PASS, Stage.NONE, name, metrics, labels=tuple(reasons)), expected)
    return _divergence(expected, converter, Symptom.WRONG_VALUES, metrics, blamed[0],
                       _blame_message(expected, blamed[0], blames[blamed[0]]))


def _compare(actual: np.ndarray, declared: str, expected: np.ndarray, dtype: str) -> OutputComparison:
    """compare(), plus the dtype the target declared: bfloat16 and float32 share storage, so check the name."""
    result = compare(actual, expected, dtype)
    if declared != dtype and result.reason is not Reason.SHAPE:
        return dataclasses.replace(result, ok=False, reason=Reason.DTYPE, actual_dtype=declared)
    return result


def _matches_graph(baseline: Sequence[np.ndarray], declared: Sequence[str] | None, eager: Sequence[np.ndarray],
                   dtypes: Sequence[str]) -> bool:
    """Whether the unconverted model's outputs have the graph's shapes and dtypes; its declared dtypes too, since
    bfloat16 and float32 share numpy storage."""
    if declared is not None and tuple(declared) != tuple(dtypes):
        return False
    return len(baseline) == len(eager) and all(b.shape == e.shape and b.dtype == e.dtype
                                               for b, e in zip(baseline, eager, strict=True))


def _divergence(expected: Expected, converter: Converter, symptom: Symptom, metrics: tuple[OutputComparison, ...],
                index: int | None, message: str) -> Verdict:
    """A divergence verdict; its signature names the operator and dtype producing the diverging output."""
    graph, stage = expected.source.graph, converter.divergence_stage
    op = dtype = None
    if index is not None:
        out = graph.outputs[index]
        op, dtype = graph.producer()[out].op, graph.types[out].dtype.value
    signature = wrong_value_signature(converter.name, stage, symptom, op, dtype)
    verdict = Verdict(symptom, stage, converter.name, metrics, signature, message, diverging_op=op,
                      diverging_dtype=dtype)
    return _labelled(verdict, expected)


def _blame_message(expected: Expected, index: int, blame: BlameResult) -> str:
    out = expected.source.graph.outputs[index]
    return (f"output {out}: target {blame.target_error:.3g} tolerance units from the float64 reference, "
            f"source {blame.source_error:.3g}")


def _labelled(verdict: Verdict, expected: Expected) -> Verdict:
    return verdict if expected.valid_inputs else verdict.with_labels(INVALID_INPUTS)


# ---- follow-ups on a divergence -------------------------------------------------------------------------

def follow_up(result: CheckResult, converter: Converter, options: ConverterOptions,
              check_options: CheckOptions) -> CheckResult:
    """Rerun (flaky?), label discontinuities, locate the first diverging operator, name a guilty pass."""
    verdict, expected, run = result.verdict, result.expected, result.target
    if verdict.symptom not in DIVERGENCES or expected is None or run is None:
        return result
    timings = dict(result.timings)
    if check_options.rerun:
        inner: dict[str, float] = {}
        with timer(timings, "rerun"):
            second = judge(expected, converter, options, inner)
        book_inner(timings, "rerun", inner)
        outputs = second.target.outputs if second.target else None
        rerun = check_rerun(verdict, second.verdict, run.outputs, outputs)
        if rerun.flaky:
            return dataclasses.replace(result, verdict=mark_flaky(verdict, rerun), timings=timings)
    verdict = verdict.with_labels(*discontinuity_labels(expected, run))
    if check_options.locate and verdict.symptom is Symptom.WRONG_VALUES:
        inner = {}
        with timer(timings, "locate"):
            verdict = locate(verdict, expected, converter, options, inner)
        book_inner(timings, "locate", inner)
    culprit = getattr(converter, "culprit", None)
    if check_options.culprit and culprit is not None and verdict.stage is Stage.GRAPH_OPTIMIZATION:
        with timer(timings, "culprit"):
            verdict = verdict.with_labels(*culprit(expected.source, options, run, _diverges(expected, run, converter)))
    return dataclasses.replace(result, verdict=verdict, timings=timings)


def add_timings(timings: dict[str, float], steps: Mapping[str, float], prefix: str = "") -> None:
    """Add each step's seconds to `timings` under `prefix + name`."""
    for name, seconds in steps.items():
        timings[prefix + name] = timings.get(prefix + name, 0.0) + seconds


def book_inner(timings: dict[str, float], follow_up_name: str, inner: Mapping[str, float]) -> None:
    """Move the steps timed inside a follow-up (the converter's export, the runtime, the oracle) out of its own
    timer into "<follow-up>.<step>" entries, so time spent converting again is booked as conversion."""
    add_timings(timings, inner, f"{follow_up_name}.")
    timings[follow_up_name] = max(timings[follow_up_name] - sum(inner.values()), 0.0)


def _diverges(expected: Expected, run: TargetRun, converter: Converter) -> Callable[[tuple[np.ndarray, ...]], bool]:
    def diverges(outputs: tuple[np.ndarray, ...]) -> bool:
        candidate = dataclasses.replace(run, outputs=outputs)
        return oracle(expected, candidate, converter).symptom in DIVERGENCES

    return diverges


def discontinuity_labels(expected: Expected, run: TargetRun) -> set[str]:
    """Labels of every node whose (float32 source) inputs sit on a discontinuity, plus signed-zero outputs."""
    source = expected.source
    env = source.module.run_all(*source.inputs)
    labels: set[str] = set()
    for node in source.graph.nodes:
        arrays = [tensor_to_numpy(env[n])[0] for n in node.inputs]
        labels |= labels_for(node.op, arrays, dict(node.attrs))
    baseline = run.baseline if run.baseline is not None else expected.eager
    for actual, base in zip(run.outputs, baseline, strict=True):
        labels |= output_labels(actual, base)
    return labels


# ---- locating the first diverging operator ----------------------------------------------------------------

def prefix_source(source: Source, k: int) -> Source:
    """The first k nodes as a graph of their own, with the same weights and input values."""
    graph = source.graph
    nodes = graph.nodes[:k]
    read = {n for node in nodes for n in node.inputs}
    outputs = tuple(o for node in nodes for o in node.outputs if o not in read)
    inputs = {n: t for n, t in graph.inputs.items() if n in read}
    weights = {n: t for n, t in graph.weights.items() if n in read}
    defined = set(inputs) | set(weights) | {o for node in nodes for o in node.outputs}
    sub = Graph(inputs, weights, nodes, outputs, {n: t for n, t in graph.types.items() if n in defined},
                {n: r for n, r in graph.ranges.items() if n in defined})
    module = GraphModule(sub, {w: getattr(source.module, w).detach() for w in weights})
    values = tuple(x for n, x in zip(graph.inputs, source.inputs, strict=True) if n in inputs)
    return Source(sub, module, values, source.device)


def locate(verdict: Verdict, expected: Expected, converter: Converter, options: ConverterOptions,
           timings: dict[str, float] | None = None) -> Verdict:
    """Bisect graph prefixes for the shortest one that still diverges; its diverging output names op and dtype.

    Assumes a divergence persists in longer prefixes (true unless a later op hides it); when no shorter prefix
    diverges, the verdict keeps the op that produces the diverging output of the whole graph.
    """
    n = len(expected.source.graph.nodes)
    seen: dict[int, Verdict] = {}
    timings = {} if timings is None else timings

    def diverging(k: int) -> bool:
        steps: dict[str, float] = {}  # one check's steps (judge replaces the converter's timings it is given)
        prefix = expect(prefix_source(expected.source, k), steps)
        if not isinstance(prefix, CheckResult):
            seen[k] = judge(prefix, converter, options, steps).verdict
        add_timings(timings, steps)
        return k in seen and seen[k].symptom is Symptom.WRONG_VALUES

    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        if diverging(mid):
            hi = mid
        else:
            lo = mid + 1
    first = seen.get(hi)
    if first is None or first.symptom is not Symptom.WRONG_VALUES or hi == n:
        return verdict
    return dataclasses.replace(verdict, signature=first.signature, diverging_op=first.diverging_op,
                               diverging_dtype=first.diverging_dtype,
                               labels=tuple(sorted(set(verdict.labels) | {f"first-diverging-prefix:{hi}"})))
