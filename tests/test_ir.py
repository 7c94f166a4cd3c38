"""Graph IR: JSON round trip, canonical bytes, validator messages, DOT picture."""

from __future__ import annotations

import json

import pytest

from generators.dot import to_dot
from generators.dtypes import DType
from generators.ir import Graph, GraphError, Node, TensorType, validate
from generators.registry import REGISTRY

F32 = DType.FLOAT32


def small_graph() -> Graph:
    t = TensorType((2, 3), F32)
    return Graph(
        inputs={"in0": t, "in1": t},
        weights={"w0": TensorType((3,), F32)},
        nodes=(
            Node("add", ("in0", "in1"), ("t0",)),
            Node("mul", ("t0", "w0"), ("t1",)),
        ),
        outputs=("t1",),
        types={"in0": t, "in1": t, "w0": TensorType((3,), F32), "t0": t, "t1": t},
    )


def test_json_round_trip_is_identity() -> None:
    graph = small_graph()
    assert Graph.loads(graph.dumps()) == graph
    assert Graph.loads(graph.dumps()).dumps() == graph.dumps()


def test_tuple_attributes_survive_round_trip() -> None:
    node = Node("conv2d", ("x", "w"), ("y",), {"stride": (2, 1), "padding": "same", "bias": False})
    assert Node.from_json(json.loads(json.dumps(node.to_json()))) == node


def replace(graph: Graph, **changes) -> Graph:
    data = {f: getattr(graph, f) for f in ("inputs", "weights", "nodes", "outputs", "types", "ranges")}
    data.update(changes)
    return Graph(**data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nodes": (Node("add", ("in0", "nope"), ("t0",)),)}, "node 0 (add) reads 'nope' before it is defined"),
        ({"nodes": (Node("frobnicate", ("in0",), ("t0",)),)}, "node 0 uses unknown operator 'frobnicate'"),
        ({"outputs": ()}, "graph has no outputs"),
        ({"outputs": ("t9",)}, "graph output 't9' is not defined"),
        ({"nodes": (Node("add", ("in0", "in1"), ("in0",)),)}, "node 0 (add) redefines tensor 'in0'"),
        ({"nodes": (Node("add", ("in0", "in1"), ()),)}, "node 0 (add) has no outputs"),
        ({"ranges": {"w0": (3, 1)}}, "value range 'w0': [3, 1] names no tensor or is empty"),
    ],
)
def test_validator_names_the_broken_rule(change: dict, message: str) -> None:
    with pytest.raises(GraphError) as info:
        validate(replace(small_graph(), **change), REGISTRY)
    assert str(info.value) == message


def test_validator_rejects_input_type_disagreeing_with_types_table() -> None:
    graph = small_graph()
    types = dict(graph.types)
    types["in0"] = TensorType((9,), F32)
    with pytest.raises(GraphError, match="input 'in0' has type"):
        validate(replace(graph, types=types))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "graph is not valid JSON"),
        ("[]", "graph JSON must be an object"),
        ('{"schema_version": 99}', "unknown graph schema version 99"),
        ('{"schema_version": 1, "inputs": {}}', "malformed graph JSON: KeyError"),
        ('{"schema_version": 1, "inputs": {"x": {"shape": [1], "dtype": "float8"}}, "weights": {}, "nodes": [],'
         ' "outputs": [], "types": {}}', "malformed graph JSON: ValueError"),
    ],
)
def test_loads_rejects_bad_text_with_one_line(text: str, message: str) -> None:
    with pytest.raises(GraphError) as info:
        Graph.loads(text)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_dot_names_every_operator_and_tensor() -> None:
    dot = to_dot(small_graph())
    assert dot.startswith("digraph convsmith {")
    for piece in ('"op0"', '"op1"', 'label="add"', 'label="mul"', '"in0"', '"w0"', '"out:t1"', "float32[2x3]"):
        assert piece in dot
