"""A graph as a TensorFlow model: Python source of `make_model(weights)` from each operator's `tf_source`, and its
eager and float64 runs. TensorFlow is imported inside the functions: importing generators never needs it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from generators.dtypes import DType
from generators.ir import Graph, Node
from generators.materialize import FLOAT64_ATTR_KEYS
from generators.ops.base import OpSpec
from generators.registry import REGISTRY
from generators.torch_source import identifier as torch_identifier


def identifier(name: str) -> str:
    """A tensor's IR name as a Python identifier (torch_source's), never one of the names the rendered model uses."""
    text = torch_identifier(name)
    return f"v_{text}" if text in ("tf", "np", "weights", "model") else text


def _key_dtypes(graph: Graph, node: Node, op: OpSpec) -> tuple[DType, ...]:
    data = [graph.types[n].dtype for n in node.inputs[:op.arity]]
    return tuple(data) if data else (graph.types[node.outputs[0]].dtype,)


def _attrs(node: Node, widen: bool) -> dict[str, Any]:
    """The node's attributes; `widen`: float dtypes they name become float64 (as the torch float64 twin's)."""
    out = dict(node.attrs)
    for key in FLOAT64_ATTR_KEYS if widen else ():
        if isinstance(out.get(key), str) and DType(out[key]).is_float:
            out[key] = DType.FLOAT64.value
    return out


def tf_unsupported(graph: Graph, registry: Mapping[str, OpSpec] = REGISTRY) -> str | None:
    """None when every node has a TensorFlow source for its dtypes, else why not, naming the first node that lacks
    one."""
    for node in graph.nodes:
        op = registry[node.op]
        dtypes = _key_dtypes(graph, node, op)
        args = [identifier(n) for n in node.inputs]
        if op.tf_source(dict(node.attrs), args) is None:
            return f"node {node.outputs[0]} ({node.op}) has no TensorFlow source for these attributes"
        if not op.tf_supports(dict(node.attrs), dtypes):
            return f"node {node.outputs[0]} ({node.op}) has no TensorFlow kernel for {dtypes[0].value}"
    return None


def render_tf_model(graph: Graph, registry: Mapping[str, OpSpec] = REGISTRY, widen: bool = False) -> str:
    """Python source of `def make_model(weights)` returning `model(<inputs>)`, one line per node; needs only `tf`
    and `np`. `widen`: attributes naming a float dtype name float64 (the float64 twin's text)."""
    problem = tf_unsupported(graph, registry)
    if problem is not None:
        raise ValueError(problem)
    names = {n: identifier(n) for n in graph.types}
    lines = ["def make_model(weights):"]
    # Weights as TensorFlow models hold them, in variables: tf2onnx freezes a captured variable into an initializer,
    # but writes a captured eager tensor (tf.constant) as one more graph input, which no caller feeds.
    lines += [f"    {names[w]} = tf.Variable(weights[{w!r}], trainable=False)" for w in graph.weights]
    lines.append(f"    def model({', '.join(names[n] for n in graph.inputs)}):")
    for node in graph.nodes:
        op = registry[node.op]
        expr = op.tf_source(_attrs(node, widen), [names[n] for n in node.inputs])
        outs = [names[n] for n in node.outputs]
        target = outs[0] if len(outs) == 1 and not op.returns_sequence else ", ".join(outs) + ","
        lines.append(f"        {target} = {expr}  # {node.op}")
    returned = "".join(f"{names[n]}, " for n in graph.outputs)
    lines += [f"        return ({returned.rstrip()})", "    return model", ""]
    return "\n".join(lines)


def tf_model(graph: Graph, weights: Mapping[str, np.ndarray], registry: Mapping[str, OpSpec] = REGISTRY,
             widen: bool = False) -> Callable[..., tuple[Any, ...]]:
    """The Python function `model` of the rendered text, its weights bound (numpy arrays as `tf_arrays` gives)."""
    import tensorflow as tf

    scope: dict[str, Any] = {"tf": tf, "np": np}
    exec(compile(render_tf_model(graph, registry, widen), "<tf model>", "exec"), scope)  # noqa: S102
    return scope["make_model"](dict(weights))


def tf_arrays(values: Mapping[str, np.ndarray], graph: Graph, widen: bool = False) -> dict[str, np.ndarray]:
    """Arrays of the graph's tensors as TensorFlow takes them: bfloat16 as ml_dtypes.bfloat16 (stored as float32
    elsewhere), every float as float64 under `widen`."""
    import ml_dtypes

    out = {}
    for name, value in values.items():
        dtype = graph.types[name].dtype
        if widen and dtype.is_float:
            out[name] = np.asarray(value, dtype=np.float64)
        elif dtype is DType.BFLOAT16:
            out[name] = np.asarray(value, dtype=ml_dtypes.bfloat16)
        else:
            out[name] = np.asarray(value, dtype=dtype.numpy)
    return out


def tf_signature(graph: Graph) -> list[Any]:
    """One tf.TensorSpec per graph input, named by its identifier."""
    import tensorflow as tf

    return [tf.TensorSpec(t.shape, getattr(tf, t.dtype.value), name=identifier(n)) for n, t in graph.inputs.items()]


def oracle_array(value: Any) -> np.ndarray:
    """A TensorFlow output as the oracle compares it (fuzzer/support/tensors.py's to_oracle_array): bfloat16 in
    float32 storage."""
    import ml_dtypes

    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    return array.astype(np.float32) if array.dtype == ml_dtypes.bfloat16 else array


def _run(graph: Graph, weights: Mapping[str, np.ndarray], inputs: Sequence[np.ndarray], widen: bool,
         registry: Mapping[str, OpSpec]) -> tuple[np.ndarray, ...]:
    import tensorflow as tf

    model = tf_model(graph, tf_arrays(weights, graph, widen), registry, widen)
    feeds = tf_arrays(dict(zip(graph.inputs, inputs, strict=True)), graph, widen)
    return tuple(oracle_array(y) for y in model(*(tf.constant(feeds[n]) for n in graph.inputs)))


def run_tf_eager(graph: Graph, weights: Mapping[str, np.ndarray], inputs: Sequence[np.ndarray],
                 registry: Mapping[str, OpSpec] = REGISTRY) -> tuple[np.ndarray, ...]:
    """The graph's outputs run by TensorFlow eager, as the oracle compares them."""
    return _run(graph, weights, inputs, False, registry)


def run_tf_float64(graph: Graph, weights: Mapping[str, np.ndarray], inputs: Sequence[np.ndarray],
                   registry: Mapping[str, OpSpec] = REGISTRY) -> tuple[np.ndarray, ...]:
    """The float64 twin in TensorFlow: float inputs and weights widened to float64, run through the same source."""
    return _run(graph, weights, inputs, True, registry)


def module_weights(module: Any, graph: Graph) -> dict[str, np.ndarray]:
    """The weights of a materialized GraphModule as numpy (bfloat16 in float32 storage, as the oracle keeps it)."""
    import torch

    out = {}
    for name in graph.weights:
        value = getattr(module, name).detach().cpu()
        out[name] = (value.float() if value.dtype == torch.bfloat16 else value).numpy()
    return out
