"""A user's model loaded from what `convsmith check` is given: a Keras file or SavedModel folder, an ONNX file, a
`package.module:factory` reference, or a zoo entry. It sits above model.py and keras_model.py, which it chooses
between."""

from __future__ import annotations

from pathlib import Path

from fuzzer.modelcheck.keras_model import is_keras_path, keras_user_model, load_keras
from fuzzer.modelcheck.model import InputSlot, ModelKind, UserModel, load_factory, load_onnx
from fuzzer.support.errors import UsageError
from fuzzer.support.quiet import library_output


def load_model(spec: str, seed: int) -> UserModel:
    """A Keras file or SavedModel folder, an ONNX file by path, else a `package.module:factory` reference;
    UsageError for anything else."""
    path = Path(spec)
    if is_keras_path(path):
        return load_keras(path, seed)
    if path.suffix == ".onnx" or path.is_file():
        return load_onnx(path, seed)
    if ":" in spec:
        return load_factory(spec)
    raise UsageError(f"{spec}: neither an ONNX or Keras model nor a package.module:factory reference")


def load_zoo(name: str, seed: int) -> UserModel:
    """A PyTorch or Keras zoo entry built at `seed`, as a user's model would come; UsageError for an unknown one."""
    from generators.zoo import ZooUnavailable
    from generators.zoo.registry import ZOO
    from generators.zoo.spec import Framework

    if name not in ZOO:
        raise UsageError(f"unknown zoo entry {name!r} (see `convsmith zoo`)")
    entry = ZOO[name]
    try:
        with library_output():  # TensorFlow's and Keras's import-time logging, for a Keras entry
            built = entry.build(seed)
    except ZooUnavailable as exc:
        raise UsageError(str(exc)) from None
    if entry.framework is Framework.KERAS:
        return keras_user_model(built.model, f"zoo:{name}", seed, built.inputs)
    slots = tuple(InputSlot(s.name, tuple(x.shape), str(x.dtype)) for s, x in zip(entry.inputs, built.inputs))
    return UserModel(ModelKind.TORCH, f"zoo:{name}", slots, built.inputs, module=built.model.eval())
