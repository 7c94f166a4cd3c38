"""Import a pybind11 extension with pybind11 internals of its own, not shared with the extensions around it.

pybind11 extensions built alike share one record per interpreter, and in it one list of exception translators: every
C++ exception that reaches Python through any of them is offered to each translator registered, newest first, and
each offer rethrows it. ONNX Runtime registers its translators there. torch's TorchScript exporter ends every walk
over a graph's nodes or values with such an exception (pybind11's stop_iteration), so in a process that had imported
ONNX Runtime each walk cost ~70 µs instead of ~17 µs, and exporting a 5-node graph took 1.5x as long
(`bench/pybind_internals.py`). ONNX Runtime imported inside `own_pybind11_internals` makes a record of its own and
keeps its translators there. Nothing crosses between ONNX Runtime and torch as a pybind11 type (numpy arrays and
bytes do), so that sharing bought nothing.
"""

from __future__ import annotations

import builtins
import ctypes
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

INTERNALS_PREFIX = "__pybind11_internals_"  # then pybind11's internals version and ABI tag
KEPT_PREFIX = "__convsmith_kept_"  # a record made inside, kept alive under a name pybind11 never looks up


def _interpreter_dict() -> MutableMapping[str, Any] | None:
    """The interpreter's state dict, where recent pybind11 versions keep the record; None where it cannot be read."""
    try:
        interpreter = ctypes.PYFUNCTYPE(ctypes.c_void_p)(("PyInterpreterState_Get", ctypes.pythonapi))
        # A borrowed reference: read as an address, since a py_object result would be released by ctypes.
        state_dict = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyInterpreterState_GetDict",
                                                                          ctypes.pythonapi))
        address = state_dict(interpreter())
    except (AttributeError, OSError):
        return None
    return ctypes.cast(address, ctypes.py_object).value if address else None


def _records(where: MutableMapping[str, Any]) -> list[str]:
    return [key for key in list(where) if isinstance(key, str) and key.startswith(INTERNALS_PREFIX)]


def places() -> list[MutableMapping[str, Any]]:
    """Where pybind11 looks for the shared record: the interpreter's state dict, or builtins in older versions."""
    found = _interpreter_dict()
    return [vars(builtins)] + ([found] if found is not None else [])


@contextmanager
def own_pybind11_internals(label: str) -> Iterator[None]:
    """Extensions first imported inside get pybind11 internals of their own (kept under a name with `label`); those
    imported before and after share theirs as usual."""
    hidden = [(where, {key: where.pop(key) for key in _records(where)}) for where in places()]
    try:
        yield
    finally:
        for where, before in hidden:
            for key in _records(where):
                where[f"{KEPT_PREFIX}{label}{key}"] = where.pop(key)  # its extension holds a pointer into it
            where.update(before)
