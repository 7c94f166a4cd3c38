"""The model an edit starts from, and the edited copy it makes: what every family of model_edits shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx
from onnx import TensorProto

from fuzzer.cases.case import CaseData

FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
INTEGERS = (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64)


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


def node_name(node: onnx.NodeProto, index: int) -> str:
    """The node's name, or its place and operator where it has none."""
    return node.name or f"#{index} ({node.op_type})"


def before_output(model: onnx.ModelProto, index: int, make: Callable[[str, str], list[onnx.NodeProto]]) -> None:
    """Insert nodes between the value graph output `index` names and the output (which keeps its name)."""
    out = model.graph.output[index].name
    inner = f"{out}__before_fix"
    for node in model.graph.node:
        node.output[:] = [inner if o == out else o for o in node.output]
        node.input[:] = [inner if n == out else n for n in node.input]
    model.graph.node.extend(make(inner, out))
