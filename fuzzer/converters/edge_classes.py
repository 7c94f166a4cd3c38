"""The edge-case classes of what a rewrite matched: the nodes it removed or changed, read from the model before it,
classed by the dtypes of their tensors, ranks and broadcasting, constant or graph-input operands and constants at
their limits, an intermediate that is also a graph output or has a second consumer, an If/Loop body, dynamic dims.

Each class has one detector in DETECTORS (a registry: tests/test_edge_classes.py runs every entry). What a rewrite
matched, read from the models before and after it, is rewrite_matches.py's; the classes are what coverage counts per
(rewrite, class) pair (fuzzer/campaign/class_coverage.py)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from generators.ops.onnx_nodes import ELEMENT_TYPES

# Constants larger than this are not read for their limits: a test's weights are small, a zoo model's are not.
VALUE_LIMIT = 1 << 16
# An integer attribute at this magnitude or beyond is a sentinel (INT_MAX slice ends, INT64_MIN starts).
EXTREME_INT = (1 << 31) - 1
EXTREME_FLOAT = 1e30


class EdgeClass(str, enum.Enum):
    """One edge-case class; the value is its name in the campaign database and the coverage report."""

    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    INT8 = "int8"
    UINT8 = "uint8"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"
    RANK0 = "rank0"
    RANK1 = "rank1"
    BROADCAST = "broadcast"
    CONSTANT_OPERAND = "constant_operand"
    INPUT_OPERAND = "graph_input_operand"
    CONSTANT_ZERO = "constant_zero"
    CONSTANT_NEGATIVE = "constant_negative"
    CONSTANT_NONFINITE = "constant_nan_or_inf"
    CONSTANT_EMPTY = "constant_empty"
    EXTREME_ATTRIBUTE = "extreme_attribute"
    INTERMEDIATE_OUTPUT = "intermediate_graph_output"
    SECOND_CONSUMER = "second_consumer"
    IN_SUBGRAPH = "in_subgraph"
    DYNAMIC_DIM = "dynamic_dim"

    @property
    def is_dtype(self) -> bool:
        return self.value in _DTYPE_CODES.values()


_DTYPE_CODES = {code: dtype.value for dtype, code in ELEMENT_TYPES.items()}  # element type -> the IR dtype's name
# The operators whose operands broadcast against each other (numpy-style): two operand shapes that differ there are
# a broadcast, elsewhere (MatMul, Conv) they are the operator's own contract.
BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Mean", "Sum", "Where", "PRelu",
                          "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                          "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"})

Shape = tuple[int | None, ...]  # None: a dim with no fixed size (a dim_param, or none known)


@dataclass(frozen=True)
class Scope:
    """What the classes need of one graph (the main graph or an If/Loop body): each value's dtype and shape where
    known, the constants, the graph's inputs and outputs, and each value's producers and consumers."""

    types: Mapping[str, tuple[int, Shape | None]]
    constants: Mapping[str, onnx.TensorProto]
    inputs: frozenset[str]
    outputs: frozenset[str]
    produced: frozenset[str]  # by a node that is not a Constant
    consumers: Mapping[str, int]
    depth: int = 0  # 0: the main graph; 1: a body of one of its nodes, and so on


@dataclass(frozen=True)
class Match:
    """The nodes one rewrite matched in one scope."""

    nodes: tuple[onnx.NodeProto, ...]
    scope: Scope
    tensors: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        names = (name for node in self.nodes for name in (*node.input, *node.output) if name)
        object.__setattr__(self, "tensors", tuple(dict.fromkeys(names)))

    @property
    def operands(self) -> tuple[str, ...]:
        """The matched nodes' inputs made outside the match."""
        made = {name for node in self.nodes for name in node.output}
        return tuple(dict.fromkeys(name for node in self.nodes for name in node.input if name and name not in made))

    def shape(self, name: str) -> Shape | None:
        found = self.scope.types.get(name)
        return found[1] if found is not None else None

    def constant_values(self) -> Iterator[np.ndarray]:
        """The values of the constant operands (those small enough to read)."""
        for name in self.operands:
            tensor = self.scope.constants.get(name)
            if tensor is None or int(np.prod(tensor.dims)) > VALUE_LIMIT:
                continue
            try:
                yield numpy_helper.to_array(tensor)
            except Exception:  # a type numpy_helper cannot read (a string tensor, external data): no limits read
                continue


Detector = Callable[[Match], bool]


def _dtype(code: int) -> Detector:
    def detect(match: Match) -> bool:
        return any(match.scope.types.get(name, (0, None))[0] == code for name in match.tensors)
    return detect


def _rank(rank: int) -> Detector:
    """Of the data the matched nodes read and write (their constants aside: a bias is rank 1 by its contract)."""
    def detect(match: Match) -> bool:
        return any((shape := match.shape(name)) is not None and len(shape) == rank
                   for name in match.tensors if name not in match.scope.constants)
    return detect


def _broadcast(match: Match) -> bool:
    for node in match.nodes:
        if node.op_type not in BROADCASTING or node.domain not in ("", "ai.onnx"):
            continue
        shapes = {match.shape(name) for name in node.input if name}
        if None not in shapes and len(shapes) > 1:
            return True
    return False


def _constant_operand(match: Match) -> bool:
    return any(name in match.scope.constants for name in match.operands)


def _input_operand(match: Match) -> bool:
    return any(name in match.scope.inputs for name in match.operands)


def _values(test: Callable[[np.ndarray], bool]) -> Detector:
    def detect(match: Match) -> bool:
        return any(test(value) for value in match.constant_values())
    return detect


def _zero(value: np.ndarray) -> bool:
    return value.size > 0 and value.dtype.kind in "fiucb" and bool(np.any(value == 0))


def _negative(value: np.ndarray) -> bool:
    return value.size > 0 and value.dtype.kind in "fi" and bool(np.any(value < 0))


def _nonfinite(value: np.ndarray) -> bool:
    return value.size > 0 and value.dtype.kind == "f" and not bool(np.all(np.isfinite(value)))


def _empty(value: np.ndarray) -> bool:
    return value.size == 0


def _extreme_attribute(match: Match) -> bool:
    for node in match.nodes:
        for attr in node.attribute:
            ints = [attr.i] if attr.type == onnx.AttributeProto.INT else list(attr.ints)
            floats = [attr.f] if attr.type == onnx.AttributeProto.FLOAT else list(attr.floats)
            if any(abs(v) >= EXTREME_INT for v in ints):
                return True
            if any(not np.isfinite(v) or abs(v) >= EXTREME_FLOAT for v in floats):
                return True
    return False


def _intermediates(match: Match) -> Iterator[str]:
    """The matched tensors a node (not a Constant) makes and another reads."""
    scope = match.scope
    return (name for name in match.tensors if name in scope.produced and scope.consumers.get(name, 0) > 0)


def _intermediate_output(match: Match) -> bool:
    return any(name in match.scope.outputs for name in _intermediates(match))


def _second_consumer(match: Match) -> bool:
    return any(match.scope.consumers.get(name, 0) > 1 for name in _intermediates(match))


def _in_subgraph(match: Match) -> bool:
    return match.scope.depth > 0


def _dynamic_dim(match: Match) -> bool:
    return any((shape := match.shape(name)) is not None and None in shape for name in match.tensors)


DETECTORS: Mapping[EdgeClass, Detector] = {
    **{EdgeClass(name): _dtype(code) for code, name in _DTYPE_CODES.items()},
    EdgeClass.RANK0: _rank(0),
    EdgeClass.RANK1: _rank(1),
    EdgeClass.BROADCAST: _broadcast,
    EdgeClass.CONSTANT_OPERAND: _constant_operand,
    EdgeClass.INPUT_OPERAND: _input_operand,
    EdgeClass.CONSTANT_ZERO: _values(_zero),
    EdgeClass.CONSTANT_NEGATIVE: _values(_negative),
    EdgeClass.CONSTANT_NONFINITE: _values(_nonfinite),
    EdgeClass.CONSTANT_EMPTY: _values(_empty),
    EdgeClass.EXTREME_ATTRIBUTE: _extreme_attribute,
    EdgeClass.INTERMEDIATE_OUTPUT: _intermediate_output,
    EdgeClass.SECOND_CONSUMER: _second_consumer,
    EdgeClass.IN_SUBGRAPH: _in_subgraph,
    EdgeClass.DYNAMIC_DIM: _dynamic_dim,
}


def classes_of(match: Match) -> frozenset[EdgeClass]:
    """Every class whose detector holds for `match` (none for an empty match)."""
    if not match.nodes:
        return frozenset()
    return frozenset(cls for cls, detect in DETECTORS.items() if detect(match))


# ---- a graph's scope, and the labels of a match ---------------------------------------------------------------

def _shape(value: onnx.ValueInfoProto) -> tuple[int, Shape | None]:
    kind = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        return 0, None
    if not kind.HasField("shape"):
        return kind.elem_type, None
    return kind.elem_type, tuple(d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim)


def scope_of(graph: onnx.GraphProto, depth: int = 0, outer: Scope | None = None) -> Scope:
    """What the classes read of `graph` (a body `depth` levels down, seeing the values of the scope `outer`)."""
    types = dict(outer.types) if outer is not None else {}
    constants = dict(outer.constants) if outer is not None else {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        types[value.name] = _shape(value)
    for tensor in graph.initializer:
        constants[tensor.name] = tensor
        types.setdefault(tensor.name, (tensor.data_type, tuple(tensor.dims)))
    produced, consumers = set(), dict[str, int]()
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and node.output:
                constants[node.output[0]] = value
                types.setdefault(node.output[0], (value.data_type, tuple(value.dims)))
            continue
        produced.update(node.output)
        for name in node.input:
            consumers[name] = consumers.get(name, 0) + 1
    inputs = frozenset(v.name for v in graph.input if v.name not in constants)
    return Scope(types, constants, inputs, frozenset(v.name for v in graph.output), frozenset(produced), consumers,
                 depth)


OP_PREFIX = "op:"  # a label naming a matched node's operator type, beside the classes


def match_labels(matches: tuple[Match, ...]) -> frozenset[str]:
    """The names of the classes of `matches`, and their operators' types as 'op:Type' ('op:domain.Type' outside the
    ONNX domain): coverage learns from them which dtypes a rewrite's operators can take at all."""
    found: set[str] = set()
    for match in matches:
        found |= {cls.value for cls in classes_of(match)}
        found |= {OP_PREFIX + (f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type)
                  for n in match.nodes}
    return frozenset(found)


def class_names(labels: frozenset[str]) -> tuple[str, ...]:
    """Labels (class names and 'op:' types) sorted, as they are stored."""
    return tuple(sorted(labels))
