"""A built zoo model as the converters and the oracle take it: a `Source` whose graph is only the model's signature
(inputs and outputs, no nodes), its float32 outputs and, for a PyTorch model, the float64 run of the same model."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from fuzzer.converters.conversion import Source
from fuzzer.converters.dynamic import DynamicAxes, DynamicDim
from fuzzer.support.tensors import to_oracle_array, to_torch
from generators.dtypes import DType
from generators.ir import Graph, TensorType
from generators.zoo import ZooModel
from oracles.compare import Tolerance


@dataclass(frozen=True)
class ZooSource:
    """A built zoo model ready for the converters: its Source, the float32 outputs and the float64 reference
    (None where the framework gives none)."""

    zoo: ZooModel
    source: Source
    eager: tuple[np.ndarray, ...]
    dtypes: tuple[str, ...]
    reference: tuple[np.ndarray, ...] | None
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def tolerance(self) -> Tolerance:
        cls = self.zoo.entry.tolerance
        return Tolerance(rtol=cls.rtol, atol=cls.atol)


def signature_graph(zoo: ZooModel, outputs: tuple[np.ndarray, ...], dtypes: tuple[str, ...]) -> Graph:
    """The graph of a zoo model's signature: its inputs and outputs typed, no nodes."""
    inputs = {spec.name: TensorType(tuple(x.shape), DType(str(x.dtype))) for spec, x in zip(zoo.entry.inputs,
                                                                                           zoo.inputs)}
    names = zoo.entry.outputs
    types = {**inputs, **{n: TensorType(tuple(o.shape), DType(d)) for n, o, d in zip(names, outputs, dtypes)}}
    return Graph(inputs, {}, (), tuple(names), types)


def dynamic_axes(zoo: ZooModel) -> DynamicAxes:
    """The entry's dynamic axes (batch, sequence) as hints: one named dim per axis name, shared by its inputs."""
    axes: dict[str, list[tuple[str, int]]] = {}
    for spec in zoo.entry.inputs:
        for axis, name in spec.dynamic.items():
            axes.setdefault(name, []).append((spec.name, axis))
    return DynamicAxes(tuple(DynamicDim(name, tuple(where)) for name, where in axes.items()), exact=False)


def prepare_torch(zoo: ZooModel) -> ZooSource:
    """Run a PyTorch model once in float32 and once in float64, and wrap it as the converters' Source."""
    start = time.perf_counter()
    inputs = tuple(to_torch(x) for x in zoo.inputs)
    with torch.no_grad():
        eager, dtypes = zip(*(to_oracle_array(o) for o in zoo.model(*inputs)))
    source_s = time.perf_counter() - start
    reference = float64_outputs(zoo.model, inputs)
    graph = signature_graph(zoo, tuple(eager), tuple(dtypes))
    source = Source(graph, zoo.model, inputs, dynamic=dynamic_axes(zoo))
    timings = {"source": source_s, "reference": time.perf_counter() - start - source_s}
    return ZooSource(zoo, source, tuple(eager), tuple(dtypes), reference, timings)


def float64_outputs(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[np.ndarray, ...] | None:
    """The model's outputs computed in float64 (a copy of it), as float64 arrays; None where it cannot run so
    (a quantized model's fake quantization takes float32 only)."""
    twin = copy.deepcopy(module).double()
    wide = tuple(x.double() if x.is_floating_point() else x for x in inputs)
    try:
        with torch.no_grad():
            return tuple(o.detach().double().numpy() for o in twin(*wide))
    except (RuntimeError, TypeError):
        return None
