"""Converter options: a frozen dataclass of JSON scalars per converter, checked when made."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from generators.ir import Graph


@dataclass(frozen=True)
class ConverterOptions:
    """Base of every converter's options: a frozen dataclass of JSON scalars (they go into bug cases).

    Values are checked when made: a wrong type or an opset outside `opset_range` is a ValueError (bad input),
    never a conversion the converter is blamed for."""

    opset_range: ClassVar[tuple[int, int]] = (7, 23)  # the opsets torch.onnx can export
    choices: ClassVar[Mapping[str, tuple[str, ...]]] = {}  # options that take one of a few names
    # The values a campaign draws an option from, where its choices (or True/False) are not the whole story.
    space: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    # Options added after bug cases were written, with the value such a case ran with (its case.json lacks them).
    older_defaults: ClassVar[Mapping[str, Any]] = {}

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
    def draw(cls, seed: int, pinned: Mapping[str, Any] | None = None, graph: Graph | None = None) -> Self:
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
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__} has no option(s) {sorted(unknown)}; known: {sorted(names)}")
        hinted = {f.name: f.type for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) and "tuple" in str(hinted[k]) else v for k, v in data.items()})


def default_opset(options_type: type[ConverterOptions]) -> int:
    """The opset an options type's defaults export at (its highest where it has no opset)."""
    return int(options_type().to_json().get("opset", options_type.opset_range[1]))


def _same_kind(value: Any, default: Any) -> bool:
    """bool is not an int here; a tuple option takes any tuple."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
