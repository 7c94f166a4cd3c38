"""The traits of the ONNX model an ONNX tool is given (traits.py counts them as 'trait:<detail>' beside operators).

A bug in how a tool reads an ONNX operator shows whichever graph operator emitted it: onnx2tf writes any Expand of a
constant shape as that shape, and fails on a Cast to bfloat16, so only the model names such a bug. Its traits are
read off the upstream export the check shares (tested_traits.py).
"""

from __future__ import annotations

import onnx

# The TorchScript exporter writes some operators as an If on the input's rank (torch.tile given more repeats than
# dims), and a converter may fail on that control flow whatever the operator the graph names.
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_IR_NAMES = {"float": "float32", "double": "float64", "float16": "float16"}
# Operators whose output a converter with static shapes folds to a constant whatever the values of their input.
_SHAPE_ONLY = frozenset({"Shape", "Size"})
# onnx2tf writes such a node as its scalar constant alone, where the other operand has two equal dimensions (so its
# Keras model ends in a constant, which Keras refuses as an output): a bug no graph operator names, since many emit
# such arithmetic (the Erf or Tanh form of GELU, `deg2rad`, `addcmul`). A Constant node's scalar, not an initializer's.
_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div"})


def model_traits(model: onnx.ModelProto) -> frozenset[str]:
    """The traits of the ONNX model an ONNX tool is given: 'model-input:<dtype>' of each input, 'model-scalar-input'
    where one is rank 0, 'model-dtype:<dtype>' of each tensor, 'constant-output' where an output depends on no
    input's values, 'repeated-output' where an output is named twice or is an input, 'control-flow' where a node of
    its graph is an If, Loop or Scan, 'model-op:<op type>' of each ONNX operator, 'scalar-constant-twin-dims'
    (_scalar_constant_twin_dims) and 'constant-shape-expand' (an Expand to a shape made of Constant nodes)."""
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    fed = [i for i in graph.input if i.name not in weights]  # an older IR lists initializers among the inputs
    found = {f"model-input:{_ir_dtype(i.type.tensor_type.elem_type)}" for i in fed}
    # The exporter may drop a graph's scalar input or give it a dim: onnx2tf's TFLite model fails on the model's.
    if any(i.type.tensor_type.HasField("shape") and not i.type.tensor_type.shape.dim for i in fed):
        found.add("model-scalar-input")
    inputs = {i.name for i in fed}
    outputs = [o.name for o in graph.output]
    dependent = _value_dependent(graph, inputs)
    if any(name not in dependent for name in outputs):
        found.add("constant-output")
    if len(set(outputs)) < len(outputs) or inputs & set(outputs):
        found.add("repeated-output")
    if any(node.op_type in _CONTROL_FLOW for node in graph.node):
        found.add("control-flow")
    found |= {f"model-op:{node.op_type}" for node in graph.node if node.domain in ("", "ai.onnx")}
    values = _inferred_values(model)
    found |= {f"model-dtype:{_ir_dtype(elem_type)}" for elem_type, _ in values.values() if elem_type}
    found |= {f"model-dtype:{_ir_dtype(t.data_type)}" for t in graph.initializer}
    constant = _made_of_constants(graph)
    if _scalar_constant_twin_dims(graph, values, constant):
        found.add("scalar-constant-twin-dims")
    # onnx2tf writes such an Expand as its shape (module docstring); one to an initializer's or a computed shape it
    # converts, so the operator alone is no precise trait.
    if any(node.op_type == "Expand" and node.input[1:2] and node.input[1] in constant for node in graph.node):
        found.add("constant-shape-expand")
    return frozenset(found)


Value = tuple[int, tuple[int, ...] | None]  # a tensor's element type, and its dims where all are known


def _inferred_values(model: onnx.ModelProto) -> dict[str, Value]:
    """Each tensor's element type and static dims, after ONNX's shape inference (the graph's own declarations where
    the inference refuses the model)."""
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except (onnx.shape_inference.InferenceError, ValueError):
        graph = model.graph
    values: dict[str, Value] = {}
    for value in (*graph.value_info, *graph.input, *graph.output):
        tensor = value.type.tensor_type
        known = tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)
        values[value.name] = (tensor.elem_type, tuple(d.dim_value for d in tensor.shape.dim) if known else None)
    return values


def _made_of_constants(graph: onnx.GraphProto) -> set[str]:
    """The tensors of `graph` that Constant nodes make, directly or through nodes reading nothing else (not the
    initializers)."""
    constant: set[str] = set()
    for node in graph.node:  # ONNX keeps nodes in topological order
        if all(name in constant for name in node.input if name):
            constant.update(node.output)
    return constant


def _scalar_constant_twin_dims(graph: onnx.GraphProto, values: dict[str, Value], constant: set[str]) -> bool:
    """Whether an Add, Sub, Mul or Div of `graph` reads a scalar made of Constant nodes alone (`constant`) and a
    tensor that other nodes computed from the inputs, two of whose static dimensions are equal (and above 1)."""
    computed = {name for node in graph.node for name in node.output} - constant
    for node in graph.node:
        if node.op_type not in _ARITHMETIC or len(node.input) != 2:
            continue
        for scalar, other in (node.input, tuple(reversed(node.input))):
            dims = [d for d in values.get(other, (0, None))[1] or () if d > 1]
            if (scalar in constant and values.get(scalar, (0, None))[1] == () and other in computed
                    and len(set(dims)) < len(dims)):
                return True
    return False


def _value_dependent(graph: onnx.GraphProto, inputs: set[str]) -> set[str]:
    """The tensors of `graph` whose values depend on those of `inputs`: a node's outputs do where one of its inputs
    does, or a name its subgraphs read from outside (an If whose condition and branches read shapes alone is folded
    like a constant)."""
    dependent = set(inputs)
    for node in graph.node:  # ONNX keeps nodes in topological order
        if node.op_type in _SHAPE_ONLY:
            continue
        if any(name in dependent for name in (*node.input, *_captured(node))):
            dependent.update(node.output)
    return dependent


def _captured(node: onnx.NodeProto) -> set[str]:
    """The names the subgraphs of `node` read that none of their own nodes, inputs or initializers make."""
    read: set[str] = set()
    for attribute in node.attribute:
        for body in (*([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else []), *attribute.graphs):
            made = {i.name for i in body.input} | {t.name for t in body.initializer}
            for inner in body.node:
                read |= {name for name in (*inner.input, *_captured(inner)) if name and name not in made}
                made.update(inner.output)
    return read


def _ir_dtype(elem_type: int) -> str:
    name = onnx.TensorProto.DataType.Name(elem_type).lower()
    return _IR_NAMES.get(name, name)
