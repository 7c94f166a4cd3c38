"""A user's Keras model as `convsmith check MODEL` takes it: a .keras or .h5 file, or a SavedModel folder Keras
wrote, loaded with tf_keras (the Keras tf2onnx and onnx2tf work with); or a Keras zoo entry. Anything else is a
UsageError of one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fuzzer.converters.tf2onnx_exporter import import_quietly
from fuzzer.modelcheck.model import InputSlot, ModelKind, UserModel, draw_inputs
from fuzzer.support.errors import UsageError
from fuzzer.support.quiet import library_output

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def is_keras_path(path: Path) -> bool:
    """A Keras model file by its suffix, or a folder holding a SavedModel."""
    return path.suffix in KERAS_SUFFIXES or (path.is_dir() and (path / "saved_model.pb").is_file())


def load_keras(path: Path, seed: int) -> UserModel:
    """The Keras model at `path` (compiled state left out: only inference matters) and inputs drawn for it."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    tf_keras = import_quietly("tf_keras")
    try:
        with library_output():
            model = tf_keras.models.load_model(str(path), compile=False)
    except Exception as exc:  # h5py, protobuf and Keras raise many kinds: all mean "not a Keras model"
        raise UsageError(f"{path}: not a Keras model ({_first_line(exc)})") from None
    return keras_user_model(model, path.name, seed)


def keras_user_model(model: Any, label: str, seed: int, inputs: Sequence[np.ndarray] | None = None) -> UserModel:
    """A loaded Keras model with its input slots (a free batch dimension taken as 1) and inputs, drawn from `seed`
    unless given."""
    if not hasattr(model, "inputs") or not model.inputs:
        raise UsageError(f"{label}: a Keras model with no declared inputs (a subclassed model never called)")
    slots = tuple(InputSlot(_input_name(t, i), tuple(d if d else 1 for d in t.shape), t.dtype.name)
                  for i, t in enumerate(model.inputs))
    arrays = draw_inputs(slots, seed) if inputs is None else tuple(inputs)
    return UserModel(ModelKind.KERAS, label, slots, arrays, keras=model)


def _input_name(tensor: Any, index: int) -> str:
    """The Keras input's layer name ('input_1'), as tf2onnx names the ONNX input from the signature."""
    name = str(getattr(tensor, "name", "") or f"input_{index}")
    return name.split(":")[0]


def keras_outputs(model: Any, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The model's outputs in inference mode."""
    tf = import_quietly("tensorflow")
    feed = [tf.constant(x) for x in inputs]
    result = model(feed if len(feed) > 1 else feed[0], training=False)
    return tuple(np.asarray(o) for o in (result if isinstance(result, (list, tuple)) else [result]))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
