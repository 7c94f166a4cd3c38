"""Entries whose model is a torch.nn.Module: weights from torch's initializers under a forked, seeded generator,
then the normalization layers' statistics and affine parameters drawn from the seed, so that folding a batch norm or
a scale of ones cannot hide a mistake."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from generators.zoo.entry import ZooEntry
from generators.zoo.spec import Framework


class TorchEntry(ZooEntry):
    """An entry built as a torch.nn.Module whose forward takes the inputs positionally and returns a tuple."""

    framework = Framework.PYTORCH

    def build_model(self, seed: int) -> torch.nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = self.module()
        settle_norms(module, np.random.default_rng([seed, 2]))
        return (module if isinstance(module, NamedOutputs) else Positional(module)).eval()

    def module(self) -> torch.nn.Module:
        """The model, built under the seeded generator (subclasses)."""
        raise NotImplementedError

    def parameter_count(self, model: Any) -> int:
        return sum(p.numel() for p in model.parameters())


def settle_norms(module: torch.nn.Module, rng: np.random.Generator) -> None:
    """Running statistics and affine parameters of every normalization layer drawn from `rng`, near their usual
    values (variance and scale around one, mean and shift around zero)."""
    with torch.no_grad():
        for sub in module.modules():
            if "Norm" not in type(sub).__name__:
                continue
            for name, value in (("running_mean", None), ("running_var", None), ("weight", None), ("bias", None)):
                tensor = getattr(sub, name, value)
                if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.dim() == 1:
                    tensor.copy_(torch.from_numpy(_near_usual(name, tensor.shape[0], rng)))


def _near_usual(name: str, size: int, rng: np.random.Generator) -> np.ndarray:
    if name in ("running_var", "weight"):
        return rng.uniform(0.6, 1.4, size).astype(np.float32)
    return rng.normal(0.0, 0.2, size).astype(np.float32)


class Positional(torch.nn.Module):
    """A model whose forward takes the inputs as one `*inputs`, as a graph's module does: the dynamo exporter's
    dynamic shapes are then given alike for every model."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.model(*inputs)


class NamedOutputs(torch.nn.Module):
    """A model called with keyword inputs whose named output fields are returned as a tuple: the positional
    signature every exporter takes."""

    def __init__(self, model: torch.nn.Module, input_names: Sequence[str], output_names: Sequence[str],
                 fixed: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.model = model
        self.input_names, self.output_names = tuple(input_names), tuple(output_names)
        self.fixed = dict(fixed or {})

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        result = self.model(**dict(zip(self.input_names, inputs)), **self.fixed)
        return tuple(result[name] for name in self.output_names)


class TransformersEntry(TorchEntry):
    """An entry built by `transformers` from a tiny config (never a download): `make(transformers)` returns the
    model; its output fields named in `outputs` become the module's outputs."""

    requires = ("transformers",)
    fixed: ClassVar[Mapping[str, Any]] = {"return_dict": True}

    def module(self) -> torch.nn.Module:
        import transformers

        model = self.make(transformers)
        return NamedOutputs(model, [spec.name for spec in self.inputs], self.outputs, self.fixed)

    def make(self, transformers: Any) -> torch.nn.Module:
        raise NotImplementedError
