"""Graph traits a root cause can hang on where no operator names it: the dtype of an input, a scalar input or output,
a dtype anywhere in the graph.

onnx2tf fails on a bfloat16 model input whatever operator reads it ("Unsupported TensorFlow type quint16"): the hits
of such a root cause share no operator, so neither (operator, dtype) demotion nor an operator cover (spread.py)
narrows to it. A trait is counted like an operator in the spread tally, as the token `trait:<detail>`; a cover that
takes one skips that converter's tests of graphs holding it (a trait cannot be cut out), so it is taken only where
most of the converter's tests holding it hit the bug (spread.MIN_TRAIT_PRECISION). Where the upstream exporter decides
whether the bfloat16 input survives, the graph's trait is not precise enough to cover that bug: an ONNX tool's test
also holds the traits of the model it is given (model_traits.py: its input and tensor dtypes, its ONNX operators, an
output no input reaches and more), read off the upstream export the check shares. And a bug that one setting of
a converter shows (onnx2tf rejects a scalar input in its TFLite model alone) is told by a trait under that setting
('tflite/scalar-input').
"""

from __future__ import annotations

from collections.abc import Iterable

from generators.ir import Graph
from generators.registry import REGISTRY

TRAIT = "trait"  # the first element of a trait's pair, (TRAIT, detail), as FEATURE is of a feature's
TRAIT_PREFIX = TRAIT + ":"


def graph_traits(graph: Graph) -> frozenset[str]:
    """The details of the traits `graph` holds: 'input:<dtype>', 'scalar-input:<dtype>' (and 'scalar-input', of
    any dtype), 'scalar-output:<dtype>', 'dtype:<dtype>' and 'onnx-core:<ONNX op>:<dtype>' (OpSpec.onnx_core)."""
    found = {f"dtype:{t.dtype.value}" for t in graph.types.values()}
    found |= {f"onnx-core:{core}:{graph.types[node.inputs[0]].dtype.value}" for node in graph.nodes
              if node.inputs and (core := REGISTRY[node.op].onnx_core)}
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
             "model-dtype": "a {} tensor in the model it is given",
             "model-scalar-input": "a scalar input in the model it is given",
             "constant-output": "an output that depends on no input", "repeated-output": "an output named twice",
             "control-flow": "an If, Loop or Scan node in the model it is given",
             "model-op": "an ONNX {} node in the model it is given",
             "scalar-constant-twin-dims": "a scalar constant in an Add, Sub, Mul or Div with a computed tensor of two "
                                          "equal dimensions, in the model it is given",
             "constant-shape-expand": "an Expand to a shape of Constant nodes in the model it is given"}
    core, _, core_dtype = dtype.partition(":")  # an onnx-core detail is '<ONNX op>:<dtype>'
    said = (f"an operator written as an ONNX {core} node, in {core_dtype}" if kind == "onnx-core" else
            " ".join(words.get(kind, kind + " {}").format(dtype).split()))
    return f"{said} (as {setting})" if setting else said


# model_traits.py's
MODEL_TRAIT_KINDS = ("model-input", "model-scalar-input", "model-dtype", "constant-output", "repeated-output",
                     "control-flow", "model-op", "scalar-constant-twin-dims", "constant-shape-expand")


def under_setting(setting: str, details: Iterable[str]) -> frozenset[str]:
    """`details` as traits under a converter's `setting` ('tflite/scalar-input'); none where it has no such setting."""
    return frozenset(f"{setting}/{detail}" for detail in details) if setting else frozenset()


def is_model_trait(token: str) -> bool:
    """Whether `token` names a trait read off the model an ONNX tool is given (under a setting or not)."""
    detail = token.removeprefix(TRAIT_PREFIX).rpartition("/")[2]
    return is_trait(token) and detail.split(":")[0] in MODEL_TRAIT_KINDS
