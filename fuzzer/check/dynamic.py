"""The source side of a dynamic export's check: the dims it marks dynamic, and the source at a second shape.

z3 finds the graph's second shape (generators/second_shape.py); the input dims that move there are what the exporter
marks, as one dim shared by all of them. The source at that shape keeps the module's weights, gets inputs of its own
from the input search, and is run eagerly and in float64 like the traced one. Without a second shape the export is
still dynamic, over the inputs' leading dims as hints, and only the traced shape runs.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from fuzzer.check.result import Expected, add_timings, timer
from fuzzer.check.source import REDRAW_STRIDE, STABLE_DRAWS, expect, source_stable
from fuzzer.converters.conversion import Source
from fuzzer.converters.dynamic import DynamicAxes, DynamicDim, identifier, leading_axes
from generators.ir import Graph
from generators.materialize import GraphModule
from generators.second_shape import SecondShape, at_input_shapes, second_shape
from generators.valid_inputs import find_valid_inputs
from generators.values import ValueStrategy

INPUT_BUDGET_S = 1.0  # the input search's budget at the second shape
PLAN = "dynamic"  # the key of the plan in Expected.plans


def planned(expected: Expected, timings: dict[str, float]) -> Expected:
    """`expected` with the dims a dynamic export marks and, where the graph has one, its source at a second shape;
    one already planned is returned as it is (a rerun, a follow-up), and a source is planned once (Expected.plans)."""
    if expected.source.dynamic is not None:
        return expected
    if PLAN not in expected.plans:
        expected.plans[PLAN] = _plan(expected, timings)
    return expected.plans[PLAN]


def _plan(expected: Expected, timings: dict[str, float]) -> Expected:
    """Find the second shape (z3), then search inputs for it and run the source there."""
    graph = expected.source.graph
    with timer(timings, "second.generate"):  # "second.<step>": booked by the step, as follow-ups are
        found = second_shape(graph)
    second = second_expected(expected, found.graph, timings) if found is not None else None
    if found is None or second is None:
        return _marked(expected, leading_axes(graph), None)
    return _marked(expected, marked_axes(graph, found), second)


def with_second_inputs(expected: Expected, axes: DynamicAxes, inputs: Sequence[torch.Tensor],
                       timings: dict[str, float]) -> Expected:
    """`expected` planned with given dims and second-shape inputs (a saved case's), not searched again."""
    graph = expected.source.graph
    shapes = {name: tuple(x.shape) for name, x in zip(graph.inputs, inputs, strict=True)}
    at_shape = at_input_shapes(graph, shapes)
    second = second_expected(expected, at_shape, timings, tuple(inputs)) if at_shape is not None else None
    return _marked(expected, axes, second)


def marked_axes(graph: Graph, found: SecondShape) -> DynamicAxes:
    """The moved input dims as one dim, bounded by the sizes valid for it, and the output axes that moved."""
    dim = DynamicDim("batch" if all(axis == 0 for _, axis in found.dims) else "size", found.dims, found.low,
                     found.high)
    return DynamicAxes((dim,), _moved_outputs(graph, found.graph, dim))


def narrowed(axes: DynamicAxes, part: Expected, second: Expected | None) -> Expected:
    """A part of the graph (a prefix being located) planned with the whole graph's dims and second shape, cut to the
    part: it must move the dims the whole graph moved, not find a second shape of its own."""
    graph = part.source.graph
    dims = tuple(dataclasses.replace(d, axes=tuple(a for a in d.axes if a[0] in graph.inputs)) for d in axes.dims)
    dims = tuple(d for d in dims if d.axes)
    outputs = _moved_outputs(graph, second.source.graph, dims[0] if dims else None) if second is not None else {}
    return _marked(part, DynamicAxes(dims, outputs, axes.exact), second)


def _moved_outputs(graph: Graph, at_second: Graph, dim: DynamicDim | None) -> dict[str, dict[int, str]]:
    """The output axes whose size differs at the second shape: named as `dim` where they move as it does."""
    moves = None
    if dim is not None:
        name, axis = dim.axes[0]
        moves = (graph.inputs[name].shape[axis], at_second.inputs[name].shape[axis])
    outputs: dict[str, dict[int, str]] = {}
    for out in graph.outputs:
        pairs = zip(graph.types[out].shape, at_second.types[out].shape, strict=True)
        for axis, (traced, second) in enumerate(pairs):
            if traced != second:
                same = dim is not None and (traced, second) == moves
                outputs.setdefault(out, {})[axis] = dim.name if same and dim else f"{identifier(out)}_{axis}"
    return outputs


def second_expected(expected: Expected, graph: Graph, timings: dict[str, float],
                    inputs: tuple[torch.Tensor, ...] | None = None) -> Expected | None:
    """The source at the second shape `graph`: the same weights, inputs searched for it (or given), eager and float64
    runs; None when the source fails there. Draws are retried, like the traced source's, while it is unstable."""
    source = expected.source
    weights = {w: getattr(source.module, w).detach().cpu() for w in source.graph.weights}
    seed = zlib.crc32(graph.dumps().encode())  # the inputs of one graph at one shape are always the same
    first = _draw(graph, weights, seed, source.device, expected.values, timings, inputs)
    if first is None or inputs is not None or not first.valid_inputs or source_stable(first):
        return first
    for attempt in range(1, STABLE_DRAWS):
        other = _draw(graph, weights, seed + attempt * REDRAW_STRIDE, source.device, expected.values, timings, None)
        if other is not None and other.valid_inputs and source_stable(other):
            return other
    return first


def _draw(graph: Graph, weights: Mapping[str, torch.Tensor], seed: int, device: str, values: str,
          timings: dict[str, float], inputs: tuple[torch.Tensor, ...] | None) -> Expected | None:
    """One draw of the second shape's inputs (or the given ones) and its eager and float64 runs."""
    module = GraphModule(graph, weights)
    valid: bool | None = True  # None: judged by the outputs alone
    if inputs is None:
        with timer(timings, "second.inputs"):
            found = find_valid_inputs(module, seed, budget_s=INPUT_BUDGET_S, values=ValueStrategy(values))
        inputs = tuple(found.inputs[n] for n in graph.inputs)
        valid = found.valid
        if any(not torch.equal(found.weights[w], weights[w]) for w in graph.weights):
            # The search settled other weights, but the exported model holds the traced source's: keep those, and
            # call the inputs valid only if the outputs are finite with them.
            module, valid = GraphModule(graph, weights), None
    steps: dict[str, float] = {}
    second = expect(Source.on(device, graph, module, inputs), steps)
    add_timings(timings, steps, "second.")
    if not isinstance(second, Expected):
        return None
    if valid is None:
        valid = all(bool(np.isfinite(x).all()) for x in (*second.eager, *second.reference) if x.dtype.kind == "f")
    return dataclasses.replace(second, valid_inputs=valid, values=values)


def _marked(expected: Expected, axes: DynamicAxes, second: Expected | None) -> Expected:
    return dataclasses.replace(expected, source=dataclasses.replace(expected.source, dynamic=axes), second=second)
