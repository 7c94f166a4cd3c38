"""Graph traits a root cause can hang on where no operator names it: the dtype of an input, a scalar input or output,
a dtype anywhere in the graph.

onnx2tf fails on a bfloat16 model input whatever operator reads it ("Unsupported TensorFlow type quint16"): the hits
of such a root cause share no operator, so neither (operator, dtype) demotion nor an operator cover (spread.py)
narrows to it. A trait is counted like an operator in the spread tally, as the token `trait:<detail>`; a cover that
takes one skips that converter's tests of graphs holding it (a trait cannot be cut out), so it is taken only where
most of the converter's tests holding it hit the bug (spread.MIN_TRAIT_PRECISION). Traits are read off the graph,
not off the model a converter is given: where the upstream exporter decides whether the bfloat16 input survives,
the graph's trait is not precise enough to cover that bug.
"""

from __future__ import annotations

from generators.ir import Graph

TRAIT = "trait"  # the first element of a trait's pair, (TRAIT, detail), as FEATURE is of a feature's
TRAIT_PREFIX = TRAIT + ":"


def graph_traits(graph: Graph) -> frozenset[str]:
    """The details of the traits `graph` holds: 'input:<dtype>', 'scalar-input:<dtype>', 'scalar-output:<dtype>'
    and 'dtype:<dtype>'."""
    found = {f"dtype:{t.dtype.value}" for t in graph.types.values()}
    found |= {f"input:{t.dtype.value}" for t in graph.inputs.values()}
    found |= {f"scalar-input:{t.dtype.value}" for t in graph.inputs.values() if t.rank == 0}
    found |= {f"scalar-output:{graph.types[n].dtype.value}" for n in graph.outputs if graph.types[n].rank == 0}
    return frozenset(found)


def trait_token(detail: str) -> str:
    """The token a trait is counted under beside operator names: 'trait:input:bfloat16'."""
    return TRAIT_PREFIX + detail


def graph_trait_tokens(graph: Graph) -> frozenset[str]:
    """The tokens of every trait `graph` holds."""
    return frozenset(trait_token(detail) for detail in graph_traits(graph))


def is_trait(token: str) -> bool:
    """Whether `token` names a trait rather than an operator."""
    return token.startswith(TRAIT_PREFIX)


def describe_trait(token: str) -> str:
    """A trait token in words, for a skipped test's message: 'a bfloat16 input'."""
    kind, _, dtype = token.removeprefix(TRAIT_PREFIX).partition(":")
    words = {"input": "a {} input", "scalar-input": "a scalar {} input", "scalar-output": "a scalar {} output",
             "dtype": "a {} tensor"}
    return words.get(kind, kind + " {}").format(dtype)
