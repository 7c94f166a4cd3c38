"""Dynamic dims as the exporters take them: named dims shared by input axes, and the output axes that follow.

A check that found a second shape for its graph marks exactly the input dims that moved there, under one name, with
the sizes the graph allows (`exact`): the TorchScript exporter gets them as `dynamic_axes`, the dynamo exporter as
one `torch.export.Dim` shared by all of them. Without a second shape the inputs' leading dims are only hints, each
under a name of its own: the dynamo exporter gets `Dim.AUTO` for them, which lets torch.export keep a dim static where
the graph pins it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from generators.ir import Graph

Axes = tuple[tuple[str, int], ...]  # (tensor name, axis) pairs


@dataclass(frozen=True)
class DynamicDim:
    """One dynamic dim: its name, the input axes that share it, and the sizes it may take (None: not bounded)."""

    name: str
    axes: Axes
    min: int | None = None
    max: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "axes": [list(a) for a in self.axes], "min": self.min, "max": self.max}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DynamicDim:
        return cls(str(data["name"]), tuple((str(n), int(a)) for n, a in data["axes"]), data.get("min"),
                   data.get("max"))


@dataclass(frozen=True)
class DynamicAxes:
    """What a dynamic export marks dynamic: `dims` over the inputs, and `outputs` (name -> axis -> dim name), the
    output axes whose size follows them. `exact`: the dims are those a second shape moved, else leading-dim hints."""

    dims: tuple[DynamicDim, ...]
    outputs: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    exact: bool = True

    def script_axes(self) -> dict[str, dict[int, str]]:
        """torch.onnx.export's `dynamic_axes`: every marked input and output axis by name."""
        axes: dict[str, dict[int, str]] = {}
        for dim in self.dims:
            for name, axis in dim.axes:
                axes.setdefault(name, {})[axis] = dim.name
        for name, named in self.outputs.items():
            axes.setdefault(name, {}).update(named)
        return axes

    def dynamo_shapes(self, input_names: Sequence[str]) -> tuple[dict[int, Any] | None, ...]:
        """torch.export's `dynamic_shapes` for positional inputs in `input_names` order: one `Dim` object per dim,
        shared by its axes (`Dim.AUTO` for hints); None for an input with no dynamic axis."""
        per_input: dict[str, dict[int, Any]] = {name: {} for name in input_names}
        for dim in self.dims:
            spec = torch.export.Dim(dim.name, min=dim.min, max=dim.max) if self.exact else torch.export.Dim.AUTO
            for name, axis in dim.axes:
                per_input[name][axis] = spec
        return tuple(per_input[name] or None for name in input_names)

    def dynamo_source(self) -> tuple[tuple[str, ...], str]:
        """`dynamo_shapes` as source: the lines that make each `Dim`, and a dict of the marked axes by input name."""
        lines = tuple(f"{d.name} = torch.export.Dim({d.name!r}, min={d.min!r}, max={d.max!r})" for d in self.dims)
        per_input: dict[str, dict[int, str]] = {}
        for dim in self.dims:
            for name, axis in dim.axes:
                per_input.setdefault(name, {})[axis] = dim.name if self.exact else "torch.export.Dim.AUTO"
        text = ", ".join(f"{name!r}: {{{', '.join(f'{a}: {d}' for a, d in axes.items())}}}"
                         for name, axes in per_input.items())
        return (lines if self.exact else ()), f"{{{text}}}"

    def to_json(self) -> dict[str, Any]:
        outputs = {name: {str(a): n for a, n in sorted(named.items())} for name, named in self.outputs.items()}
        return {"dims": [d.to_json() for d in self.dims], "exact": self.exact, "outputs": outputs}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DynamicAxes:
        outputs = {str(name): {int(a): str(n) for a, n in named.items()} for name, named in data["outputs"].items()}
        return cls(tuple(DynamicDim.from_json(d) for d in data["dims"]), outputs, bool(data["exact"]))


def leading_axes(graph: Graph) -> DynamicAxes:
    """Hints for a dynamic export with no second shape: every input's leading dim of size 2 or more, one name each
    (a size-1 dim broadcasts, and torch.export specializes it)."""
    dims = tuple(DynamicDim(f"{identifier(name)}_0", ((name, 0),)) for name, ttype in graph.inputs.items()
                 if ttype.rank and ttype.shape[0] >= 2)
    return DynamicAxes(dims, exact=False)


def identifier(name: str) -> str:
    """A tensor name as a Python identifier, for a dim's name (torch.export.Dim wants one)."""
    text = re.sub(r"\W", "_", name)
    return text if text and not text[0].isdigit() else f"d_{text}"
