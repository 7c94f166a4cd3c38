"""Catalogue coverage: which ATen operators the generator's operators reach, and which of those an exporter
translates that no generator operator exercises (`convsmith ops --coverage`).

An operator's ATen operators are read from its one-node graph twice: the torch functions its forward calls (by
name: `F.conv1d` is aten::conv1d) and a TorchScript trace (the view the TorchScript exporter has, e.g.
aten::_convolution). The comparison with the exporters' lists is by operator name, overloads folded: an estimate,
since an exporter may reach an operator through a decomposition of another.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import AtenOps
from generators.generator import single_op_graph
from generators.materialize import materialize, random_inputs
from generators.registry import OpRegistry


@dataclass(frozen=True)
class Coverage:
    """One exporter's view: the ATen operators it translates, those the catalogue exercises, and the gap."""

    converter: str
    supported: frozenset[str]
    exercised: frozenset[str]

    @property
    def missing(self) -> tuple[str, ...]:
        """Public operators translated by the exporter and exercised by no generator operator (internal `_x`
        names and in-place `x_` variants, which a model rarely calls as such, left out)."""
        return tuple(sorted(name for name in self.supported - self.exercised if _public(name)))


def _public(name: str) -> bool:
    bare = name.removeprefix("aten::")
    return not bare.startswith("_") and not bare.endswith("_")


def exercised_aten_ops(registry: OpRegistry) -> dict[str, frozenset[str]]:
    """Each generator operator's ATen operators, from a trace of its one-node graph (first dtype it takes)."""
    reached: dict[str, frozenset[str]] = {}
    for op in registry.values():
        sig = op.sigs[0]
        graph = single_op_graph(op, sig.key_dtype, seed=0, registry=registry)
        if graph is None:
            reached[op.name] = frozenset()
            continue
        module = materialize(graph, 0, registry=registry)
        inputs = tuple(random_inputs(graph, 0).values())
        calls = _Calls()
        with warnings.catch_warnings(), calls:
            warnings.simplefilter("ignore")
            module(*inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(module, inputs, check_trace=False)
        kinds = {node.kind() for node in traced.inlined_graph.nodes()} | {f"aten::{name}" for name in calls.names}
        reached[op.name] = frozenset(k for k in kinds if k.startswith("aten::"))
    return reached


class _Calls(torch.overrides.TorchFunctionMode):
    """Records the name of every torch function (and Tensor method) called under it."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        name = getattr(func, "__name__", "").strip("_")  # F.max_pool2d is `_max_pool2d`, `x >> y` is `__rshift__`
        if name:
            self.names.add(_OPERATOR_NAMES.get(name, name))
        return func(*args, **(kwargs or {}))


# Python operators on tensors whose name is not their ATen operator's (`__pow__` is aten::pow already).
_OPERATOR_NAMES = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "invert": "bitwise_not",
                   "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift", "getitem": "index",
                   "truediv": "div", "floordiv": "floor_divide", "mod": "remainder", "radd": "add", "rmul": "mul",
                   "rtruediv": "div"}


def coverage(converters: Sequence[Converter], reached: Mapping[str, frozenset[str]]) -> list[Coverage]:
    """The coverage of each converter that starts from PyTorch."""
    exercised = frozenset().union(*reached.values())
    out = []
    for converter in converters:
        if isinstance(converter, AtenOps):
            supported = converter.supported_aten_ops()
            out.append(Coverage(converter.name, supported, exercised & supported))
    return out
