"""What ONNX's operator schemas say of a type error: from which opset an operator takes a type, if any. A model that
gives an operator a type its schema rejects is fixed one way when a later opset takes the type (export at that opset,
or cast around the operator) and another when none does; the note added to the message tells the root cause which."""

from __future__ import annotations

import functools
import re

import onnx

_TYPE_ERROR = re.compile(r"op_type:(\w+).*?typestr: (\w+), has unsupported type: (tensor\(\w+\))")
_NOTED = re.compile(r"takes (tensor\(\w+\)) from opset (\d+)\]")  # schema_note's own words


def schema_note(message: str) -> str:
    """' [ONNX's Elu takes tensor(bfloat16) from opset 22]', ' [no opset of ONNX's Elu takes tensor(bfloat16)]',
    or '' for a message that is no schema type error."""
    found = _TYPE_ERROR.search(message)
    if found is None:
        return ""
    op, param, type_str = found.groups()
    first = first_opset_taking(op, param, type_str)
    if first is None:
        return f" [no opset of ONNX's {op} takes {type_str}]"
    return f" [ONNX's {op} takes {type_str} from opset {first}]"


def noted_opset(message: str) -> int:
    """The opset a schema_note in `message` says takes the type (0 where it has no such note)."""
    noted = noted_type(message)
    return noted[1] if noted is not None else 0


def noted_type(message: str) -> tuple[str, int] | None:
    """The type ('tensor(bfloat16)') and the opset from which ONNX takes it, as a schema_note in `message` says."""
    found = _NOTED.search(message)
    return (found.group(1), int(found.group(2))) if found else None


@functools.cache
def first_opset_taking(op: str, param: str, type_str: str) -> int | None:
    """The first opset whose schema of `op` (default domain) lets type parameter `param` be `type_str`."""
    for version in range(1, onnx.defs.onnx_opset_version() + 1):
        try:
            schema = onnx.defs.get_schema(op, version)
        except onnx.defs.SchemaError:
            continue
        allowed = [c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == param]
        if allowed and type_str in allowed[0]:
            return schema.since_version
    return None


def float32_only_ops(model: bytes) -> tuple[str, ...]:
    """The operators of a model whose schema, at the model's opset, takes float32 but no float64: where a float64
    model computes in float32 by design (ONNX's Celu), not by a converter's choice."""
    proto = onnx.load_from_string(model)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return ()
    ops = dict.fromkeys(n.op_type for n in proto.graph.node if n.domain in ("", "ai.onnx"))
    return tuple(op for op in ops if _float_without_double(op, opset))


@functools.cache
def _float_without_double(op: str, opset: int) -> bool:
    try:
        schema = onnx.defs.get_schema(op, opset)
    except onnx.defs.SchemaError:
        return False
    floats = [c.allowed_type_strs for c in schema.type_constraints if "tensor(float)" in c.allowed_type_strs]
    return bool(floats) and all("tensor(double)" not in allowed for allowed in floats)
