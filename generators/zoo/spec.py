"""What a zoo entry declares besides its builder: framework, family, tolerance class and the spec of each input."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np


class Framework(str, enum.Enum):
    """What the entry's model is written in, so which exporters can take it."""

    PYTORCH = "pytorch"
    KERAS = "keras"


class Family(str, enum.Enum):
    """The kind of architecture, as a maintainer would group real models."""

    VISION_CNN = "vision-cnn"
    VISION_TRANSFORMER = "vision-transformer"
    ENCODER = "encoder"
    DECODER = "decoder"
    ENCODER_DECODER = "encoder-decoder"
    RECURRENT = "recurrent"
    NORMALIZATION = "normalization"
    DETECTION = "detection"
    SEGMENTATION = "segmentation"
    QUANTIZED = "quantized"


class ToleranceClass(enum.Enum):
    """How far a correct float32 conversion may drift from the source: deeper stacks reorder more sums, and a
    quantized model may round a tie the other way, which moves an output by one quantization step."""

    SHALLOW = (1e-4, 1e-5)
    DEEP = (1e-3, 1e-4)
    QUANTIZED = (1e-2, 5e-2)

    @property
    def rtol(self) -> float:
        return self.value[0]

    @property
    def atol(self) -> float:
        return self.value[1]


class InputKind(str, enum.Enum):
    """How an input's values are drawn: normal floats, token ids below `high`, or an attention mask of ones."""

    FLOAT = "float"
    TOKENS = "tokens"
    MASK = "mask"


@dataclass(frozen=True)
class InputSpec:
    """One input: name, shape at the entry's small size, dtype, how its values are drawn, and its dynamic axes
    (axis -> name such as "batch" or "sequence"), which a dynamic export marks."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    kind: InputKind = InputKind.FLOAT
    high: int = 0  # token ids are drawn from [0, high)
    dynamic: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))

    def make(self, rng: np.random.Generator) -> np.ndarray:
        """Values for this input drawn from `rng`."""
        if self.kind is InputKind.TOKENS:
            return rng.integers(0, self.high, size=self.shape).astype(self.dtype)
        if self.kind is InputKind.MASK:
            return np.ones(self.shape, dtype=self.dtype)
        return rng.standard_normal(self.shape).astype(self.dtype)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "kind": self.kind.value,
                "dynamic": {str(axis): name for axis, name in self.dynamic.items()}}

    def describe(self) -> str:
        """`name[1,3,32,32]:float32`, a dynamic axis shown by its name (`input_ids[batch=2,sequence=8]:int64`)."""
        dims = ",".join(f"{self.dynamic[i]}={d}" if i in self.dynamic else str(d) for i, d in enumerate(self.shape))
        return f"{self.name}[{dims}]:{self.dtype}"


def image(name: str = "pixel_values", channels: int = 3, size: int = 32, last: bool = False) -> InputSpec:
    """A batch of one image, channels first (PyTorch) or last (Keras), its batch axis dynamic."""
    shape = (1, size, size, channels) if last else (1, channels, size, size)
    return InputSpec(name, shape, dynamic=MappingProxyType({0: "batch"}))


def tokens(name: str, vocab: int, batch: int = 2, sequence: int = 8) -> InputSpec:
    """Token ids of a (batch, sequence) text input, both axes dynamic."""
    return InputSpec(name, (batch, sequence), "int64", InputKind.TOKENS, vocab,
                     MappingProxyType({0: "batch", 1: "sequence"}))


def mask(name: str = "attention_mask", batch: int = 2, sequence: int = 8) -> InputSpec:
    """An attention mask of ones over a (batch, sequence) text input, both axes dynamic."""
    return InputSpec(name, (batch, sequence), "int64", InputKind.MASK, 0,
                     MappingProxyType({0: "batch", 1: "sequence"}))


def sequence(name: str, features: int, batch: int = 2, steps: int = 6) -> InputSpec:
    """A (batch, steps, features) float sequence, batch and steps dynamic."""
    return InputSpec(name, (batch, steps, features), dynamic=MappingProxyType({0: "batch", 1: "sequence"}))
