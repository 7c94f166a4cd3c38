"""Follow-ups on a divergence: label the discontinuities its inputs touch, locate the first diverging operator (its
signature names that operator and dtype), rerun it (flaky?), and let the converter name a guilty pass. A
dynamic export's divergence at its second shape is labelled from the inputs and run at that shape."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from fuzzer.check.dynamic import narrowed
from fuzzer.check.fold_rounding import judged_fold
from fuzzer.check.judge import judge
from fuzzer.check.narrowed_drift import judged_narrowed
from fuzzer.check.oracle import oracle
from fuzzer.check.result import CheckOptions, CheckResult, Expected, add_timings, book_inner, timer
from fuzzer.check.source import expect
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import DivergenceLabels, RuntimeOptimizer
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.support.tensors import to_oracle_array
from generators.edit import alone, prefix
from generators.ir import Graph
from generators.materialize import GraphModule
from oracles.discontinuity import labels_for, output_labels
from oracles.dynamic import at_second_shape
from oracles.rerun import check_rerun, mark_flaky
from oracles.verdict import Stage, Verdict

# A divergence whose located signature the campaign has filed is not rerun: its case was rerun when it was filed,
# and at 5 nodes reruns of such repeats took a tenth of a worker's time.
NOT_RERUN = "not-rerun:signature-already-filed"
NOT_RERUN_BUDGET = "not-rerun:follow-up-budget-spent"  # CheckOptions.follow_up_budget_s went into locating
LOCATE_STOPPED = "locate-stopped:follow-up-budget-spent"  # the bisection ran out of it: the operator is not located
# How a divergence was located, with the 1-based position k of the operator or prefix: "<label>:<k>".
ALONE_LABEL = "diverges-alone"  # the operator at k diverges converted alone
PREFIX_LABEL = "first-diverging-prefix"  # the first k operators are the shortest prefix that diverges


def follow_up(result: CheckResult, converter: Converter, options: ConverterOptions,
              check_options: CheckOptions, filed: Callable[[str], bool] | None = None) -> CheckResult:
    """Label discontinuities, locate the first diverging operator, rerun (flaky?) unless `filed` says the located
    signature is already filed, and name a guilty pass."""
    verdict, expected, run = result.verdict, result.expected, result.target
    if not verdict.symptom.is_divergence or expected is None or run is None:
        return result
    timings, traced = dict(result.timings), expected
    if at_second_shape(verdict) and expected.second is not None and result.second is not None:
        expected, run = expected.second, result.second  # what showed the divergence: the run at the second shape
    folded = judged_narrowed(judged_fold(verdict, expected, run), expected, run)
    if folded is not verdict and not folded.symptom.is_divergence:  # rounding by design: nothing to follow up
        return dataclasses.replace(result, verdict=folded)
    verdict = folded
    located = verdict.with_labels(*discontinuity_labels(expected, run))
    deadline = time.perf_counter() + check_options.follow_up_budget_s
    if check_options.locate:
        inner: dict[str, float] = {}
        with timer(timings, "locate"):
            located = locate(located, traced, converter, options, inner, deadline)
        book_inner(timings, "locate", inner)
    if check_options.rerun and filed is not None and located.signature and filed(located.signature):
        located = located.with_labels(NOT_RERUN)
    elif check_options.rerun and time.perf_counter() > deadline:
        located = located.with_labels(NOT_RERUN_BUDGET)
    elif check_options.rerun:
        inner = {}
        with timer(timings, "rerun"):
            again = judge(traced, converter, options, inner)
        book_inner(timings, "rerun", inner)
        shown = again.second if at_second_shape(again.verdict) else again.target
        rerun = check_rerun(verdict, again.verdict, run.outputs, shown.outputs if shown else None)
        if rerun.flaky:
            return dataclasses.replace(result, verdict=mark_flaky(verdict, rerun), timings=timings)
    culprit, verdict = None, located
    if check_options.culprit and located.stage is Stage.GRAPH_OPTIMIZATION:
        with timer(timings, "culprit"):
            shows = _diverges(expected, run, converter)
            culprit = converter.bisect(expected.source, options, run, shows) \
                if isinstance(converter, RuntimeOptimizer) else None
            labels = converter.divergence_labels(expected.source, options, run, shows) \
                if isinstance(converter, DivergenceLabels) else ()
        verdict = located.with_labels(*labels, *(culprit.labels() if culprit is not None else ()))
    return dataclasses.replace(result, verdict=verdict, timings=timings, culprit=culprit)


def _diverges(expected: Expected, run: TargetRun, converter: Converter) -> Callable[[tuple[np.ndarray, ...]], bool]:
    def diverges(outputs: tuple[np.ndarray, ...]) -> bool:
        candidate = dataclasses.replace(run, outputs=outputs)
        return oracle(expected, candidate, converter).symptom.is_divergence

    return diverges


def discontinuity_labels(expected: Expected, run: TargetRun) -> set[str]:
    """Labels of every node whose (float32 source) inputs sit on a discontinuity, plus signed-zero outputs."""
    source = expected.source
    env = source.module.run_all(*source.inputs)
    labels: set[str] = set()
    for node, op in zip(source.graph.nodes, source.module.ops, strict=True):
        arrays = [to_oracle_array(env[n])[0] for n in node.inputs]
        labels |= labels_for(op, arrays, dict(node.attrs))
    baseline = run.baseline if run.baseline is not None else expected.eager
    if len(run.outputs) != len(baseline):  # a target with another number of outputs: no output to pair
        return labels
    for actual, base in zip(run.outputs, baseline, strict=True):
        labels |= output_labels(actual, base)
    return labels


def shortest_failing_prefix(verdict: Verdict, graph: Graph) -> int:
    """The fewest leading nodes that make an output the verdict found failing (all of them when it names none)."""
    position = {out: i for i, node in enumerate(graph.nodes) for out in node.outputs}
    made = [position[name] + 1 for name, m in zip(graph.outputs, verdict.metrics, strict=False)
            if not m.ok and name in position]
    return min(made, default=len(graph.nodes))


def prefix_source(source: Source, k: int) -> Source:
    """The first k nodes as a source of their own, with the same weights and input values."""
    sub = prefix(source.graph, k)
    module = GraphModule(sub, {w: getattr(source.module, w).detach() for w in sub.weights})
    values = tuple(x for n, x in zip(source.graph.inputs, source.inputs, strict=True) if n in sub.inputs)
    return Source(sub, module, values, source.device)


def node_source(source: Source, index: int) -> Source | None:
    """Node `index` alone, reading the values it reads in the source's eager run (what other nodes made becomes
    graph inputs, weights stay weights); None when it reads no input, which an exporter folds to a constant."""
    sub = alone(source.graph, index)
    if sub is None:
        return None
    env = source.module.run_all(*source.inputs)
    module = GraphModule(sub, {w: getattr(source.module, w).detach() for w in sub.weights})
    values = tuple(env[n].detach().clone().contiguous() for n in sub.inputs)
    return Source(sub, module, values, source.device)


def locate(verdict: Verdict, expected: Expected, converter: Converter, options: ConverterOptions,
           timings: dict[str, float] | None = None, deadline: float | None = None) -> Verdict:
    """Name the faulty operator behind a divergence; its diverging output names op and dtype, so a consumer of the
    faulty operator is not blamed for it.

    First the operator that makes the earliest failing output is converted alone, on the values it reads in the
    source (node_source): when it diverges the same way (values, shape or dtype), it is faulty itself, and a one-node
    export settles it. Else graph prefixes are bisected for the shortest one that still diverges the same way. That
    assumes a divergence persists in longer prefixes (true unless a later op hides it), so no prefix longer than the
    one that makes the earliest failing output is tried; when no shorter prefix diverges, the verdict keeps the op
    that produces the diverging output of the whole graph. A dynamic export's prefixes move the dims the whole graph
    moved, to the same second shape (its operators are not tried alone). No conversion starts after `deadline`
    (time.perf_counter()): the verdict is then kept as it is, labelled LOCATE_STOPPED.
    """
    n = len(expected.source.graph.nodes)
    seen: dict[int, Verdict] = {}
    timings = {} if timings is None else timings
    hi = shortest_failing_prefix(verdict, expected.source.graph)
    alone = _alone(verdict, expected, converter, options, hi - 1, timings)
    if alone is not None:
        return alone

    def diverging(k: int) -> bool:
        steps: dict[str, float] = {}  # one check's steps (judge replaces the converter's timings it is given)
        part = expect(prefix_source(expected.source, k), steps)
        if isinstance(part, Expected) and expected.source.dynamic is not None:  # a dynamic export's prefix
            second = expect(prefix_source(expected.second.source, k), steps) if expected.second else None
            part = narrowed(expected.source.dynamic, part, second if isinstance(second, Expected) else None)
        if not isinstance(part, CheckResult):
            seen[k] = judge(part, converter, options, steps).verdict
        add_timings(timings, steps)
        return k in seen and seen[k].symptom is verdict.symptom

    lo = 1
    while lo < hi:
        if deadline is not None and time.perf_counter() > deadline:
            return verdict.with_labels(LOCATE_STOPPED)
        mid = (lo + hi) // 2
        if diverging(mid):
            hi = mid
        else:
            lo = mid + 1
    if hi < n and hi not in seen and deadline is not None and time.perf_counter() > deadline:
        return verdict.with_labels(LOCATE_STOPPED)
    if hi < n and hi not in seen:  # the bisection started from this prefix without trying it
        diverging(hi)
    first = seen.get(hi)
    if first is None or first.symptom is not verdict.symptom or hi == n:
        return verdict
    return _named_by(verdict, first, f"{PREFIX_LABEL}:{hi}")


def _alone(verdict: Verdict, expected: Expected, converter: Converter, options: ConverterOptions, index: int,
           timings: dict[str, float]) -> Verdict | None:
    """The verdict located at node `index` when that node, converted alone, diverges as the whole graph does."""
    if expected.source.dynamic is not None:
        return None
    source = node_source(expected.source, index)
    if source is None:
        return None
    steps: dict[str, float] = {}
    part = expect(source, steps)
    found = judge(part, converter, options, steps).verdict if isinstance(part, Expected) else None
    add_timings(timings, steps)
    if found is None or found.symptom is not verdict.symptom:
        return None
    return _named_by(verdict, found, f"{ALONE_LABEL}:{index + 1}")


def _named_by(verdict: Verdict, found: Verdict, label: str) -> Verdict:
    """`verdict` with the signature, operator and dtype of the smaller graph that `found` judged, labelled how."""
    return dataclasses.replace(verdict, signature=found.signature, diverging_op=found.diverging_op,
                               diverging_dtype=found.diverging_dtype,
                               labels=tuple(sorted(set(verdict.labels) | {label})))
