"""Graph traits a root cause can hang on where no operator names it: the dtype of an input, a scalar input or output,
a dtype anywhere in the graph.

onnx2tf fails on a bfloat16 model input whatever operator reads it ("Unsupported TensorFlow type quint16"): the hits
of such a root cause share no operator, so neither (operator, dtype) demotion nor an operator cover (spread.py)
narrows to it. A trait is counted like an operator in the spread tally, as the token `trait:<detail>`; a cover that
takes one skips that converter's tests of graphs holding it (a trait cannot be cut out), so it is taken only where
most of the converter's tests holding it hit the bug (spread.MIN_TRAIT_PRECISION). Where the upstream exporter decides
whether the bfloat16 input survives, the graph's trait is not precise enough to cover that bug: an ONNX tool's test
also holds the traits of the model it is given (model_traits: its input dtypes, an output no input reaches, an output
named twice, an If, Loop or Scan node, each ONNX operator it holds, a scalar constant in arithmetic on a tensor of two
equal dims), read off the upstream export the check shares. Many graph operators lower to one ONNX operator: onnx2tf
writes any Expand of a constant shape as that shape, whichever graph operator emitted the Expand, so only the model's
operator names that bug. And a bug that one setting of
a converter shows (onnx2tf rejects a scalar input in its TFLite model alone) is told by a trait under that setting
('tflite/scalar-input').
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from generators.ir import Graph

TRAIT = "trait"  # the first element of a trait's pair, (TRAIT, detail), as FEATURE is of a feature's
TRAIT_PREFIX = TRAIT + ":"


def graph_traits(graph: Graph) -> frozenset[str]:
    """The details of the traits `graph` holds: 'input:<dtype>', 'scalar-input:<dtype>' (and 'scalar-input', of
    any dtype), 'scalar-output:<dtype>' and 'dtype:<dtype>'."""
    found = {f"dtype:{t.dtype.value}" for t in graph.types.values()}
    found |= {f"input:{t.dtype.value}" for t in graph.inputs.values()}
    scalar = {f"scalar-input:{t.dtype.value}" for t in graph.inputs.values() if t.rank == 0}
    found |= scalar | ({"scalar-input"} if scalar else set())
    found |= {f"scalar-output:{graph.types[n].dtype.value}" for n in graph.outputs if graph.types[n].rank == 0}
    return frozenset(found)


def trait_token(detail: str) -> str:
    """The token a trait is counted under beside operator names: 'trait:input:bfloat16'."""
    return TRAIT_PREFIX + detail


def trait_detail(token: str) -> str:
    """The detail a trait token counts: 'input:bfloat16' of 'trait:input:bfloat16'."""
    return token.removeprefix(TRAIT_PREFIX)


def graph_trait_tokens(graph: Graph) -> frozenset[str]:
    """The tokens of every trait `graph` holds."""
    return frozenset(trait_token(detail) for detail in graph_traits(graph))


def is_trait(token: str) -> bool:
    """Whether `token` names a trait rather than an operator."""
    return token.startswith(TRAIT_PREFIX)


def describe_trait(token: str) -> str:
    """A trait token in words, for a skipped test's message: 'a bfloat16 input'."""
    setting, _, detail = token.removeprefix(TRAIT_PREFIX).rpartition("/")
    kind, _, dtype = detail.partition(":")
    words = {"input": "a {} input", "scalar-input": "a scalar {} input", "scalar-output": "a scalar {} output",
             "dtype": "a {} tensor", "model-input": "a {} input in the model it is given",
             "constant-output": "an output that depends on no input", "repeated-output": "an output named twice",
             "control-flow": "an If, Loop or Scan node in the model it is given",
             "model-op": "an ONNX {} node in the model it is given",
             "scalar-constant-twin-dims": "a scalar constant in an Add, Sub, Mul or Div with a computed tensor of two "
                                          "equal dimensions, in the model it is given"}
    said = " ".join(words.get(kind, kind + " {}").format(dtype).split())
    return f"{said} (as {setting})" if setting else said


MODEL_TRAIT_KINDS = ("model-input", "constant-output", "repeated-output", "control-flow", "model-op",
                     "scalar-constant-twin-dims")
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
    """The traits of the ONNX model an ONNX tool is given: 'model-input:<dtype>' of each input, 'constant-output'
    where an output depends on no input's values, 'repeated-output' where an output is named twice or is an
    input, 'control-flow' where a node of its graph is an If, Loop or Scan, 'model-op:<op type>' of each ONNX
    operator of its graph, 'scalar-constant-twin-dims' (_scalar_constant_twin_dims)."""
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    fed = [i for i in graph.input if i.name not in weights]  # an older IR lists initializers among the inputs
    found = {f"model-input:{_ir_dtype(i.type.tensor_type.elem_type)}" for i in fed}
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
    if _scalar_constant_twin_dims(model):
        found.add("scalar-constant-twin-dims")
    return frozenset(found)


def _scalar_constant_twin_dims(model: onnx.ModelProto) -> bool:
    """Whether an Add, Sub, Mul or Div of the model reads a scalar made of Constant nodes alone and a tensor that
    other nodes computed from the inputs, two of whose static dimensions are equal (and above 1)."""
    graph = model.graph
    if not any(node.op_type in _ARITHMETIC for node in graph.node):
        return False
    try:
        shapes = _static_shapes(onnx.shape_inference.infer_shapes(model).graph)
    except (onnx.shape_inference.InferenceError, ValueError):  # a model the inference refuses shows no dims
        return False
    constant: set[str] = set()
    for node in graph.node:
        if all(name in constant for name in node.input if name):
            constant.update(node.output)
    computed = {name for node in graph.node for name in node.output} - constant
    for node in graph.node:
        if node.op_type not in _ARITHMETIC or len(node.input) != 2:
            continue
        for scalar, other in (node.input, tuple(reversed(node.input))):
            dims = [d for d in shapes.get(other, ()) if d > 1]
            if scalar in constant and shapes.get(scalar) == () and other in computed and len(set(dims)) < len(dims):
                return True
    return False


def _static_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    """The shape of each value of `graph` whose dims are all known, by name."""
    shapes = {}
    for value in (*graph.value_info, *graph.input, *graph.output):
        tensor = value.type.tensor_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[value.name] = tuple(d.dim_value for d in tensor.shape.dim)
    return shapes


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


def under_setting(setting: str, details: Iterable[str]) -> frozenset[str]:
    """`details` as traits under a converter's `setting` ('tflite/scalar-input'); none where it has no such setting."""
    return frozenset(f"{setting}/{detail}" for detail in details) if setting else frozenset()


def is_model_trait(token: str) -> bool:
    """Whether `token` names a trait read off the model an ONNX tool is given (under a setting or not)."""
    detail = token.removeprefix(TRAIT_PREFIX).rpartition("/")[2]
    return is_trait(token) and detail.split(":")[0] in MODEL_TRAIT_KINDS
