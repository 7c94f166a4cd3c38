"""Edits of the converted model's constants: an index or shift the source wraps around a dimension (e), and a
float64 constant that holds the float32 rounding of an exact number (f)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from fuzzer.cases.case import CaseData
from fuzzer.diagnosis.edit_target import INTEGERS, Candidate, Target, edited

INDEX_LIMIT = 2**31  # larger integer constants are "to the end" markers, not indices or shifts
MATH_CONSTANTS = {"ln(10)": math.log(10), "ln(2)": math.log(2), "pi": math.pi, "e": math.e, "sqrt(2)": math.sqrt(2),
                  "1/ln(10)": 1 / math.log(10), "1/ln(2)": 1 / math.log(2), "1/sqrt(2)": 1 / math.sqrt(2),
                  "sqrt(2/pi)": math.sqrt(2 / math.pi), "sqrt(pi)": math.sqrt(math.pi), "pi/2": math.pi / 2}


# ---- (e) a missing modulo ------------------------------------------------------------------------------------

def modulo_edits(target: Target) -> Iterator[Candidate]:
    """Every integer constant equal to v replaced by v mod n, for each dimension size n of the source that v
    reaches past (an index or shift the source wraps around, used as it is)."""
    sizes = sorted({d for t in target.case.graph.types.values() for d in t.shape if d > 1})
    values = sorted({int(v) for _, arr in _int_constants(target.model) for v in arr.ravel()
                     if abs(int(v)) < INDEX_LIMIT})
    for v in values:
        for n in sizes:
            if -n <= v < n:
                continue
            model = target.copy()
            places = _replace_ints(model, v, v % n)
            yield edited("modulo", f"replace the integer constant {v} by {v} mod {n} = {v % n} ({places} "
                            f"place{'s' if places > 1 else ''})", f"the source wraps {v} around a dimension of size "
                            f"{n}; the converted model uses it as it is", model)


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every constant tensor: initializers and Constant nodes' values."""
    yield from model.graph.initializer
    for node in model.graph.node:
        if node.op_type == "Constant":
            yield from (a.t for a in node.attribute if a.name == "value")


def _int_constants(model: onnx.ModelProto) -> Iterator[tuple[onnx.TensorProto, np.ndarray]]:
    for tensor in _tensors(model):
        if tensor.data_type in INTEGERS:
            yield tensor, numpy_helper.to_array(tensor)


def _replace_ints(model: onnx.ModelProto, old: int, new: int) -> int:
    places = 0
    for tensor, arr in list(_int_constants(model)):
        hit = arr == old
        if hit.any():
            places += int(hit.sum())
            tensor.CopyFrom(numpy_helper.from_array(np.where(hit, new, arr).astype(arr.dtype), tensor.name))
    return places


# ---- (f) a float64 constant rounded to float32 ---------------------------------------------------------------

def exact_values(case: CaseData) -> dict[str, float]:
    """The exact numbers a float64 model may hold as constants: well-known ones, and every float attribute of the
    source graph (`clamp`'s min = 0.1), by the name a report gives them."""
    values = dict(MATH_CONSTANTS)
    for node in case.graph.nodes:
        for name, value in node.attrs.items():
            items = value if isinstance(value, list | tuple) else (value,)
            for item in items:
                if isinstance(item, float) and not isinstance(item, bool) and math.isfinite(item):
                    values.setdefault(f"{node.op}'s {name}", item)
    return values


def constant_edits(target: Target) -> Iterator[Candidate]:
    """Every constant of the converted model compared with the source's exact numbers: a float64 constant holding
    the float32 rounding of one (or a float32 constant a float64 computation casts up) gets the exact value back."""
    for t, tensor in enumerate(_tensors(target.model)):
        if tensor.data_type not in (TensorProto.DOUBLE, TensorProto.FLOAT):
            continue
        arr = numpy_helper.to_array(tensor)
        for name, exact in exact_values(target.case).items():
            rounded = float(np.float32(exact))
            if rounded == exact or not np.any(arr == rounded):
                continue
            if tensor.data_type == TensorProto.FLOAT and not _cast_to_double(target.model, t):
                continue
            model = target.copy()
            copy = list(_tensors(model))[t]
            fixed = np.where(arr == rounded, exact, arr.astype(np.float64))
            copy.CopyFrom(numpy_helper.from_array(fixed, tensor.name))
            yield edited("constant", f"store {name} = {exact!r} exactly: the model holds its float32 rounding "
                         f"{rounded!r}", f"{name} was rounded to float32 in a float64 computation", model)


def _cast_to_double(model: onnx.ModelProto, index: int) -> bool:
    """Whether constant `index` (in _tensors order) is read only by Casts to float64: a float64 value stored as
    float32."""
    name = _tensor_names(model)[index]
    readers = [n for n in model.graph.node if name in n.input]
    return bool(readers) and all(n.op_type == "Cast" and any(a.name == "to" and a.i == TensorProto.DOUBLE
                                                              for a in n.attribute) for n in readers)


def _tensor_names(model: onnx.ModelProto) -> list[str]:
    """The value name of each constant, in _tensors order (a Constant node's is its output)."""
    names = [t.name for t in model.graph.initializer]
    for node in model.graph.node:
        if node.op_type == "Constant":
            names += [node.output[0] for a in node.attribute if a.name == "value"]
    return names
