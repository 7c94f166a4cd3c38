"""The check's side of the oracle: a target run and its expected outputs handed to oracles.judgement as numpy, and
what the oracle asks of the source model (settled outputs, the rounded reference, float32-only operators)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from fuzzer.check.result import Expected
from fuzzer.check.source import (
    extreme_masks,
    float32_attr_reference,
    flushed_outputs,
    graph_values,
    overflow_masks,
)
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import TargetRun
from fuzzer.converters.schema import float32_only_ops
from oracles.judgement import SourceSide, TargetSide, judge_outputs
from oracles.verdict import Verdict


def oracle(expected: Expected, run: TargetRun, converter: Converter) -> Verdict:
    """The oracle's verdict on `run` of `converter`, judged against `expected`."""
    graph = expected.source.graph
    producer = graph.producer()
    source = SourceSide(tuple(graph.outputs), expected.source.output_dtypes,
                        tuple(producer[o].op if o in producer else None for o in graph.outputs),
                        expected.eager, expected.reference if run.reference is None else run.reference,
                        expected.valid_inputs, None if run.reference is None else expected.reference)
    target = TargetSide(converter.name, converter.divergence_stage, tuple(run.outputs), tuple(run.output_dtypes),
                        None if run.baseline is None else tuple(run.baseline),
                        None if run.baseline_dtypes is None else tuple(run.baseline_dtypes), dict(run.computed_in))
    return judge_outputs(source, target, SourceSettling(expected, run.model))


class SourceSettling:
    """oracles.judgement.Settling from the source model: each value read from what the source's runs kept, or the
    graph run again (once) when they kept none."""

    def __init__(self, expected: Expected, model: bytes | None) -> None:
        self.expected, self.model = expected, model
        self.values = {False: _settling_values(expected, False), True: _settling_values(expected, True)}
        # Asked per blamed output, computed once.
        self.flushed = functools.cache(self._flushed)
        self.overflowed = functools.cache(functools.partial(overflow_masks, expected.source))  # per narrowing
        self.extreme_inputs = functools.cache(functools.partial(extreme_masks, expected.source))

    def settled(self, outputs: Sequence[np.ndarray], float64: bool, kept: Sequence[bool] = ()
                ) -> tuple[np.ndarray, ...]:
        return settled(self.expected, outputs, self.values[float64], kept)

    def rounded_reference(self) -> tuple[np.ndarray, ...] | None:
        rounded = float32_attr_reference(self.expected.source)
        return None if rounded is None else settled(self.expected, rounded, self.values[True])

    def float32_only_ops(self) -> tuple[str, ...]:
        return () if self.model is None else float32_only_ops(self.model)

    def _flushed(self) -> tuple[np.ndarray, ...] | None:
        outputs = flushed_outputs(self.expected.source)
        return None if outputs is None else self.settled(outputs, False)


def _settling_values(expected: Expected, float64: bool) -> Callable[[], Mapping[str, np.ndarray]]:
    """The values `settled` reads: those the source's runs kept, else the graph run again (once) when asked."""
    kept = expected.settling64 if float64 else expected.settling
    if kept is not None:
        return lambda: kept
    return functools.cache(functools.partial(graph_values, expected.source, float64))


def settled(expected: Expected, outputs: Sequence[np.ndarray], values: Callable[[], Mapping[str, np.ndarray]],
            kept: Sequence[bool] = ()) -> tuple[np.ndarray, ...]:
    """The graph's outputs with what torch leaves unspecified settled by the operator that made each one (the
    order of topk(sorted=False), which of tied elements an index names), from the op's input values (`values`,
    called only when such an op made an output); an output whose shape is not the graph's, or marked in `kept`, is
    left as it is."""
    graph, ops = expected.source.graph, expected.source.module.ops
    made_by = {o: (i, pos) for i, node in enumerate(graph.nodes) for pos, o in enumerate(node.outputs)}
    result = []
    for k, (name, value) in enumerate(zip(graph.outputs, outputs, strict=True)):
        where = made_by.get(name)
        if where is None or (k < len(kept) and kept[k]) or tuple(np.shape(value)) != graph.types[name].shape:
            result.append(value)
            continue
        node, op = graph.nodes[where[0]], ops[where[0]]
        inputs = [values()[n] for n in node.inputs] if op.settles_output else []
        result.append(op.canonical_output(node.attrs, where[1], value, inputs))
    return tuple(result)
