"""Edits that add a step the converted model lacks: a Cast to the source's dtype (c), a rounding of outputs the
source gives as whole numbers, or an integer division floored as the source floors it (d)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import onnx
from onnx import TensorProto, helper

from fuzzer.cases.case import CaseData
from fuzzer.diagnosis.edit_target import FLOATS, INTEGERS, Candidate, Target, before_output, edited, node_name

IR_TO_ONNX = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
              "bfloat16": TensorProto.BFLOAT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
              "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}


# ---- (c) a missing Cast --------------------------------------------------------------------------------------

def cast_edits(target: Target) -> Iterator[Candidate]:
    """A Cast to the source's dtype on each output whose declared element type differs from it."""
    for i, out in enumerate(target.model.graph.output):
        want = _source_type(target.case, i)
        have = out.type.tensor_type.elem_type
        if want is None or want == have:
            continue
        model = target.copy()
        before_output(model, i, lambda x, y, to=want: [helper.make_node("Cast", [x], [y], to=to)])
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
            before_output(model, i, _rounding(op))
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
        yield edited("rounding", f"compute {node_name(node, i)} (integer Div) in floating point and Floor it",
                        "ONNX's integer Div truncates toward zero where the source floors", model)
