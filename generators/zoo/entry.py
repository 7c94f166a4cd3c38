"""A zoo entry: one real architecture at a small size, built from a config with seeded random weights.

An entry declares its framework, family, inputs, output names and tolerance class, and builds its model; the
libraries it needs (`requires`) are imported only when it is built, so the registry lists every entry without the
`zoo` extra installed and building one without it raises ZooUnavailable, one line naming the extra.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from generators.zoo.spec import Family, Framework, InputSpec, ToleranceClass

EXTRA_HINT = "install convsmith's zoo extra (`make install`, or pip install -e '.[zoo]')"


class ZooUnavailable(Exception):
    """An entry's library does not import here; the message is one line that names what to install."""


@dataclass(frozen=True)
class ZooModel:
    """A built entry: the model (a torch.nn.Module whose forward takes the inputs positionally and returns a tuple
    of tensors, or a Keras model) and its inputs as numpy arrays, in the entry's input order."""

    entry: ZooEntry
    model: Any
    inputs: tuple[np.ndarray, ...]
    seed: int

    def parameter_count(self) -> int:
        """How many weights the model holds."""
        return self.entry.parameter_count(self.model)


class ZooEntry:
    """Base class: subclasses set the class attributes and implement `build_model`."""

    name: ClassVar[str]
    family: ClassVar[Family]
    framework: ClassVar[Framework]
    inputs: ClassVar[tuple[InputSpec, ...]]
    outputs: ClassVar[tuple[str, ...]]
    tolerance: ClassVar[ToleranceClass] = ToleranceClass.DEEP
    requires: ClassVar[tuple[str, ...]] = ()  # import names the builder needs beyond torch and numpy
    summary: ClassVar[str] = ""  # what the architecture is, in a few words
    # How many weights the built model holds: declared, so that listing the zoo builds nothing (a test checks it).
    parameters: ClassVar[int]

    def available(self) -> tuple[bool, str]:
        """(True, "") when every library it needs is installed; else (False, one line saying what to install)."""
        missing = [name for name in self.requires if importlib.util.find_spec(name) is None]
        if missing:
            return False, f"zoo entry {self.name} needs {', '.join(missing)}: {EXTRA_HINT}"
        return True, ""

    def build(self, seed: int) -> ZooModel:
        """The model with weights drawn from `seed`, and inputs drawn from it too; ZooUnavailable without its
        libraries."""
        ok, reason = self.available()
        if not ok:
            raise ZooUnavailable(reason)
        return ZooModel(self, self.build_model(seed), self.make_inputs(seed), seed)

    def make_inputs(self, seed: int) -> tuple[np.ndarray, ...]:
        """One array per input spec, drawn from `seed`."""
        rng = np.random.default_rng([seed, 1])
        return tuple(spec.make(rng) for spec in self.inputs)

    def build_model(self, seed: int) -> Any:
        raise NotImplementedError

    def parameter_count(self, model: Any) -> int:
        raise NotImplementedError

    def describe_inputs(self) -> str:
        return " ".join(spec.describe() for spec in self.inputs)
