"""Small edits of a converted ONNX model that common conversion faults map to (Fix-Con's classes): an attribute the
source operator sets, a weight the source holds, a missing Cast, a missing rounding step, a missing modulo, a
float64 constant rounded to float32. Each edit family is one generator of candidates, listed in EDITS."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuzzer.cases.case import CaseData

IR_TO_ONNX = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
              "bfloat16": TensorProto.BFLOAT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
              "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}
FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
INTEGERS = (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64)
DTYPE_ATTRS = frozenset({"to", "dtype", "output_dtype", "saturate"})  # they name a type, not a number
INDEX_LIMIT = 2**31  # larger integer constants are "to the end" markers, not indices or shifts
MATH_CONSTANTS = {"ln(10)": math.log(10), "ln(2)": math.log(2), "pi": math.pi, "e": math.e, "sqrt(2)": math.sqrt(2),
                  "1/ln(10)": 1 / math.log(10), "1/ln(2)": 1 / math.log(2), "1/sqrt(2)": 1 / math.sqrt(2),
                  "sqrt(2/pi)": math.sqrt(2 / math.pi), "sqrt(pi)": math.sqrt(math.pi), "pi/2": math.pi / 2}


@dataclass(frozen=True)
class Candidate:
    """One edited copy of the model, with what was changed and the conversion fault it points at."""

    kind: str
    edit: str
    description: str
    model: onnx.ModelProto


@dataclass(frozen=True)
class Target:
    """The model to edit, the case it belongs to, and the element type of every value in it."""

    model: onnx.ModelProto
    case: CaseData
    types: dict[str, int]

    @classmethod
    def of(cls, model: onnx.ModelProto, case: CaseData) -> Target:
        try:
            g = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # a model shape inference rejects: edits that need types are not tried
            return cls(model, case, {})
        types = {v.name: v.type.tensor_type.elem_type for v in (*g.input, *g.value_info, *g.output)}
        types.update({t.name: t.data_type for t in g.initializer})
        return cls(model, case, types)

    def copy(self) -> onnx.ModelProto:
        """A copy to edit (then made a Candidate by `edited`)."""
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        return model


def edited(kind: str, edit: str, description: str, model: onnx.ModelProto) -> Candidate:
    """A candidate whose declared shapes are inferred again, so an edit that fixes an output's shape validates."""
    del model.graph.value_info[:]
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph.output
    except Exception:  # an edit the checker will reject anyway; judging it says so
        return Candidate(kind, edit, description, model)
    for out, found in zip(model.graph.output, inferred):
        if found.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.CopyFrom(found.type.tensor_type.shape)
        else:
            out.type.tensor_type.shape.SetInParent()  # unknown rank is allowed; a missing shape field is not
    return Candidate(kind, edit, description, model)


def candidates(target: Target) -> Iterator[Candidate]:
    """Every edit of every family, in EDITS order."""
    for family in EDITS:
        yield from family(target)


def _node_name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"#{index} ({node.op_type})"


def _fmt(value: Any) -> str:
    return f"[{', '.join(map(str, value))}]" if isinstance(value, tuple) else repr(value)


# ---- (a) the source operator's attribute values -------------------------------------------------------------

def source_values(case: CaseData) -> list[tuple[str, Any]]:
    """(`name=value` as the source writes it, value as ONNX holds it) for the diverging source operator's numeric
    attributes: bools as 0/1, sequences as tuples; each value once, under the first attribute that has it."""
    seen: dict[Any, str] = {}
    for node in case.graph.nodes:
        if node.op != case.verdict.diverging_op:
            continue
        for name, value in node.attrs.items():
            shown = f"{name}={value!r}"
            if isinstance(value, bool):
                value = int(value)
            elif isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
                value = tuple(int(v) for v in value)
            elif not isinstance(value, int | float):
                continue
            seen.setdefault((type(value), value), shown)
    return [(shown, value) for (_, value), shown in seen.items()]


def attribute_edits(target: Target) -> Iterator[Candidate]:
    """Each numeric attribute of each node set to each numeric attribute value of the diverging source node; nodes
    nearest the outputs first (the converted operator's last node decides the output, e.g. a reduction's keepdims,
    where an earlier node's edit may only happen to broadcast to the right shape)."""
    values = source_values(target.case)
    op = target.case.verdict.diverging_op
    for i, node in reversed(list(enumerate(target.model.graph.node))):
        for a, attr in enumerate(node.attribute):
            if attr.name in DTYPE_ATTRS:
                continue
            for source_attr, value in values:
                new = _attribute_value(attr, value)
                if new is None:
                    continue
                model = target.copy()
                model.graph.node[i].attribute[a].CopyFrom(helper.make_attribute(attr.name, new))
                yield edited("attribute", f"set {node.op_type}.{attr.name} = {_fmt(new)} on node "
                                f"{_node_name(node, i)}", f"the source's `{op}` has {source_attr}, which the "
                                f"converted {node.op_type} does not carry over", model)


def _attribute_value(attr: onnx.AttributeProto, value: Any) -> Any:
    """The value as this attribute's type, when it fits and differs from what the attribute holds; else None."""
    if attr.type == onnx.AttributeProto.INT and isinstance(value, int) and value != attr.i:
        return value
    if attr.type == onnx.AttributeProto.FLOAT and isinstance(value, int | float) and float(value) != attr.f:
        return float(value)
    if attr.type == onnx.AttributeProto.INTS and isinstance(value, tuple):
        held = tuple(attr.ints)
        if len(held) == 2 * len(value):  # ONNX pads: the begins, then the ends
            value = value + value
        if len(held) == len(value) and value != held:
            return value
    return None


# ---- (b) the source's weights --------------------------------------------------------------------------------

def weight_edits(target: Target) -> Iterator[Candidate]:
    """Each initializer replaced by each source weight of its shape whose values differ."""
    for i, init in enumerate(target.model.graph.initializer):
        held = numpy_helper.to_array(init)
        for name, weight in target.case.weights.items():
            if weight.shape != held.shape or weight.dtype.name == "bfloat16":
                continue
            value = np.asarray(weight).astype(held.dtype)
            if np.array_equal(value, held, equal_nan=held.dtype.kind == "f"):
                continue
            model = target.copy()
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(value, init.name))
            yield edited("weight", f"replace initializer {init.name} by the source's weight {name}",
                            f"the converted model's copy of weight `{name}` differs from the source's", model)


# ---- (c) a missing Cast --------------------------------------------------------------------------------------

def cast_edits(target: Target) -> Iterator[Candidate]:
    """A Cast to the source's dtype on each output whose declared element type differs from it."""
    for i, out in enumerate(target.model.graph.output):
        want = _source_type(target.case, i)
        have = out.type.tensor_type.elem_type
        if want is None or want == have:
            continue
        model = target.copy()
        _before_output(model, i, lambda x, y, to=want: [helper.make_node("Cast", [x], [y], to=to)])
        model.graph.output[i].type.tensor_type.elem_type = want
        yield edited("cast", f"cast output {out.name} to {_type_name(want)}",
                        f"the converted model gives {_type_name(have)} where the source gives {_type_name(want)}: "
                        "a missing Cast", model)


def _source_type(case: CaseData, index: int) -> int | None:
    if index >= len(case.graph.outputs):
        return None
    return IR_TO_ONNX.get(case.graph.types[case.graph.outputs[index]].dtype.value)


def _type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type).lower()


def _before_output(model: onnx.ModelProto, index: int, make: Callable[[str, str], list[onnx.NodeProto]]) -> None:
    """Insert nodes between the value graph output `index` names and the output (which keeps its name)."""
    out = model.graph.output[index].name
    inner = f"{out}__before_fix"
    for node in model.graph.node:
        node.output[:] = [inner if o == out else o for o in node.output]
        node.input[:] = [inner if n == out else n for n in node.input]
    model.graph.node.extend(make(inner, out))


# ---- (d) a missing rounding step -----------------------------------------------------------------------------

ROUNDINGS = ("Floor", "Round", "Ceil", "Trunc")


def rounding_edits(target: Target) -> Iterator[Candidate]:
    """Floor/Round/Ceil/Trunc before each floating output whose expected values are whole numbers; an integer Div
    computed in floating point and floored (ONNX's integer Div truncates toward zero)."""
    case = target.case
    for i, out in enumerate(target.model.graph.output):
        if i >= len(case.expected) or out.type.tensor_type.elem_type not in FLOATS or not _whole(case.expected[i]):
            continue
        for op in ROUNDINGS:
            model = target.copy()
            _before_output(model, i, _rounding(op))
            yield edited("rounding", f"insert {op} before output {out.name}",
                            f"the source's values are whole numbers: a missing {op} step", model)
    yield from _floored_divisions(target)


def _whole(x: np.ndarray) -> bool:
    values = np.asarray(x, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.all(finite == np.round(finite)))


def _rounding(op: str) -> Callable[[str, str], list[onnx.NodeProto]]:
    def make(x: str, y: str) -> list[onnx.NodeProto]:
        if op != "Trunc":
            return [helper.make_node(op, [x], [y])]
        # ONNX has no Trunc: sign(x) * floor(|x|)
        return [helper.make_node("Sign", [x], [f"{y}__sign"]), helper.make_node("Abs", [x], [f"{y}__abs"]),
                helper.make_node("Floor", [f"{y}__abs"], [f"{y}__floor"]),
                helper.make_node("Mul", [f"{y}__sign", f"{y}__floor"], [y])]

    return make


def _floored_divisions(target: Target) -> Iterator[Candidate]:
    for i, node in enumerate(target.model.graph.node):
        if node.op_type != "Div" or target.types.get(node.output[0]) not in INTEGERS:
            continue
        elem = target.types[node.output[0]]
        model = target.copy()
        a, b, y = node.input[0], node.input[1], node.output[0]
        nodes = [helper.make_node("Cast", [a], [f"{y}__a"], to=TensorProto.DOUBLE),
                 helper.make_node("Cast", [b], [f"{y}__b"], to=TensorProto.DOUBLE),
                 helper.make_node("Div", [f"{y}__a", f"{y}__b"], [f"{y}__q"]),
                 helper.make_node("Floor", [f"{y}__q"], [f"{y}__floor"]),
                 helper.make_node("Cast", [f"{y}__floor"], [y], to=elem)]
        del model.graph.node[i]
        for offset, new in enumerate(nodes):
            model.graph.node.insert(i + offset, new)
        yield edited("rounding", f"compute {_node_name(node, i)} (integer Div) in floating point and Floor it",
                        "ONNX's integer Div truncates toward zero where the source floors", model)


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


EDITS: tuple[Callable[[Target], Iterator[Candidate]], ...] = (
    attribute_edits, weight_edits, cast_edits, rounding_edits, modulo_edits, constant_edits,
)
