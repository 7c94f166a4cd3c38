"""The user's model as `convsmith check MODEL` takes it: an ONNX file, a PyTorch factory (`package.module:factory`,
returning the module and its example inputs), a Keras model file or SavedModel folder (keras_model.py) or a zoo
entry; and its inputs, read from an .npz or drawn from its input spec. Anything that is not such a model is a
UsageError of one line."""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import helper

from fuzzer.support.errors import UsageError


class ModelKind(str, enum.Enum):
    ONNX = "onnx"
    TORCH = "pytorch"
    KERAS = "keras"


@dataclass(frozen=True)
class InputSlot:
    """One model input: its name, concrete shape and numpy dtype name."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class UserModel:
    """The model and its example inputs (numpy, in input order)."""

    kind: ModelKind
    label: str
    slots: tuple[InputSlot, ...]
    inputs: tuple[np.ndarray, ...]
    onnx_model: onnx.ModelProto | None = None
    module: torch.nn.Module | None = None
    keras: Any = None  # a tf_keras Model (TensorFlow is imported only for one)

    def feeds(self, inputs: Sequence[np.ndarray] | None = None) -> dict[str, np.ndarray]:
        return {s.name: x for s, x in zip(self.slots, self.inputs if inputs is None else inputs, strict=True)}


def load_onnx(path: Path, seed: int) -> UserModel:
    """An ONNX model file and inputs drawn from its declared input types (free dimensions taken as 1)."""
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except Exception as exc:  # onnx raises DecodeError, ValidationError, ...: all mean "not a model"
        raise UsageError(f"{path}: not a valid ONNX model ({str(exc).splitlines()[0][:200]})") from None
    slots = onnx_slots(model)
    return UserModel(ModelKind.ONNX, path.name, slots, draw_inputs(slots, seed), onnx_model=model)


def onnx_slots(model: onnx.ModelProto) -> tuple[InputSlot, ...]:
    """The graph's data inputs (not initializers) with concrete shapes."""
    constants = {t.name for t in model.graph.initializer}
    slots = []
    for value in model.graph.input:
        if value.name in constants:
            continue
        tensor = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor.shape.dim)
        slots.append(InputSlot(value.name, shape, str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))))
    return tuple(slots)


def draw_inputs(slots: Sequence[InputSlot], seed: int) -> tuple[np.ndarray, ...]:
    """Standard normal floats, integers in [0, 8), bools: the campaign's plain value strategy, from `seed`."""
    rng = np.random.default_rng([seed, 7])
    out = []
    for slot in slots:
        dtype = np.dtype(slot.dtype)
        if dtype.kind == "f":
            out.append(rng.standard_normal(slot.shape).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, slot.shape).astype(bool))
        else:
            out.append(rng.integers(0, 8, slot.shape).astype(dtype))
    return tuple(out)


def load_factory(ref: str) -> UserModel:
    """`package.module:factory`: a callable returning (module, example inputs); its errors are the user's."""
    module_name, _, attr = ref.partition(":")
    try:
        factory: Callable[[], Any] = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"{ref}: cannot import the factory ({exc})") from None
    try:
        made = factory()
    except Exception as exc:
        raise UsageError(f"{ref}: the factory raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
    module, example = _module_and_inputs(ref, made)
    inputs = tuple(x.detach().cpu().numpy() for x in example)
    slots = tuple(InputSlot(f"input_{i}", tuple(x.shape), str(x.dtype)) for i, x in enumerate(inputs))
    return UserModel(ModelKind.TORCH, ref, slots, inputs, module=module.eval())


def _module_and_inputs(ref: str, made: Any) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)):
        raise UsageError(f"{ref}: the factory must return (torch.nn.Module, example inputs)")
    example = made[1] if isinstance(made[1], (tuple, list)) else (made[1],)
    if not example or not all(isinstance(x, torch.Tensor) for x in example):
        raise UsageError(f"{ref}: the example inputs must be a tensor or a tuple of tensors")
    return made[0], tuple(example)


def with_inputs(model: UserModel, arrays: Mapping[str, np.ndarray], where: str) -> UserModel:
    """The model with inputs from `arrays` (by input name, else in order); UsageError where they do not match."""
    keys = list(arrays)
    names = [s.name for s in model.slots]
    chosen = [arrays[n] for n in names] if all(n in arrays for n in names) else \
        [arrays[k] for k in keys] if len(keys) == len(names) else None
    if chosen is None:
        raise UsageError(f"{where}: holds {keys}, the model takes {names}")
    for slot, x in zip(model.slots, chosen):
        if not _fits(model, slot, x):
            raise UsageError(f"{where}: {slot.name} is {x.dtype}{list(x.shape)}, the model takes "
                             f"{slot.dtype}{list(slot.shape)}")
    slots = tuple(InputSlot(s.name, tuple(x.shape), s.dtype) for s, x in zip(model.slots, chosen))
    return dataclasses.replace(model, slots=slots, inputs=tuple(chosen))


def _fits(model: UserModel, slot: InputSlot, x: np.ndarray) -> bool:
    """Same dtype and rank, and the same size on every axis the model fixes (all of a PyTorch model's)."""
    if str(x.dtype) != slot.dtype or x.ndim != len(slot.shape):
        return False
    if model.onnx_model is None:
        return tuple(x.shape) == slot.shape
    declared = next(v for v in model.onnx_model.graph.input if v.name == slot.name).type.tensor_type.shape.dim
    return all(not d.HasField("dim_value") or d.dim_value <= 0 or d.dim_value == n for d, n in zip(declared, x.shape))


def read_inputs(model: UserModel, path: Path) -> UserModel:
    """Inputs from an .npz file (no pickles: a file may come from someone else)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read inputs ({str(exc).splitlines()[0][:200]})") from None
    return with_inputs(model, arrays, str(path))
