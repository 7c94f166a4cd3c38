"""Edits that carry over what the source holds: the diverging source operator's attribute values (a) and the
source's weights (b)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fuzzer.cases.case import CaseData
from fuzzer.diagnosis.edit_target import Candidate, Target, edited, node_name

DTYPE_ATTRS = frozenset({"to", "dtype", "output_dtype", "saturate"})  # they name a type, not a number


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
                                f"{node_name(node, i)}", f"the source's `{op}` has {source_attr}, which the "
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
