"""A concrete graph lifted back to z3: every tensor's dims as integer terms, constrained by the operators' own builds.

The generator keeps no record of the choices each `build` made (its rng draws), so lifting replays each node's build
under a context that enumerates them (depth first, then at random) until a replay reproduces the node: its outputs'
ranks and dtypes, its weights' ranks and dtypes, attributes that can equal the recorded ones, and requirements that
hold at the recorded shapes. The recorded attributes and the weights' shapes are then pinned: what stays free is the
graph inputs' dims and whatever follows from them. A node no replay reproduces within its budget is pinned whole (its
tensors keep their shapes), which is always valid. Call `lift` inside `fresh_z3_context()`: builds make terms in
z3's default context.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from generators.dtypes import DType
from generators.ir import Graph, Node
from generators.ops.base import Build, OpSpec, SymTensor
from generators.registry import REGISTRY

MAX_REPLAYS = 400  # builds tried per node before it is pinned whole (most nodes need fewer than 20)
DEPTH_FIRST = 100  # of those, the ones tried in each depth-first pass (unhinted choices, then every choice)
HINT_TRUST = 0.8  # how often a random replay takes the option the attributes suggest
RLIMIT = 400_000  # z3 resource units per check, as the generator's (a time limit would depend on the machine)


class _Mismatch(Exception):
    """This replay cannot be the recorded node (a weight of another rank or dtype, a range it does not cover)."""


@dataclass(frozen=True)
class SymbolicGraph:
    """The graph with z3 integer dims for every tensor (weights' are constants) and the constraints that relate them."""

    graph: Graph
    dims: Mapping[str, tuple[z3.ArithRef, ...]]
    constraints: tuple[z3.BoolRef, ...]
    pinned: tuple[int, ...]  # nodes no replay reproduced: their tensors keep their recorded shapes


def lift(graph: Graph, registry: Mapping[str, OpSpec] = REGISTRY) -> SymbolicGraph:
    """The graph's dims as z3 terms under every node's replayed build (see the module doc)."""
    dims: dict[str, tuple[z3.ArithRef, ...]] = {}
    constraints: list[z3.BoolRef] = []
    for name, ttype in graph.inputs.items():
        dims[name] = tuple(z3.Int(f"{name}.{k}") for k in range(ttype.rank))
        constraints += [d >= 1 for d in dims[name]]
    for name, ttype in graph.weights.items():
        dims[name] = tuple(z3.IntVal(v) for v in ttype.shape)
    pinned: list[int] = []
    for index, node in enumerate(graph.nodes):
        for out in node.outputs:
            dims[out] = tuple(z3.Int(f"{out}.{k}") for k in range(graph.types[out].rank))
        found = _replay_node(index, node, registry[node.op], graph, dims)
        if found is None:
            pinned.append(index)
            found = [pin for name in (*node.inputs, *node.outputs) for pin in _recorded(dims, graph, name)]
        constraints += found
    return SymbolicGraph(graph, dims, tuple(constraints), tuple(pinned))


def _recorded(dims: Mapping[str, tuple[z3.ArithRef, ...]], graph: Graph, name: str) -> list[z3.BoolRef]:
    """`name`'s dims equal to its recorded shape."""
    return [d == v for d, v in zip(dims[name], graph.types[name].shape, strict=True)]


class _Decisions:
    """Where one replay's choices come from. Depth first: a prefix of option indices, then each choice's first
    option (the attributes' hint, where it has one); `next_prefix` moves on over the choices without a hint only
    (whose first option is a guess), or over `every` choice. Random (given an rng): a hinted choice keeps its hint
    most of the time, any other choice is uniform."""

    def __init__(self, prefix: Sequence[int], rng: random.Random | None = None, every: bool = False) -> None:
        self.prefix = list(prefix)
        self.rng = rng
        self.every = every  # depth first over every choice, hinted or not
        self.trace: list[tuple[int, int, bool]] = []  # (option taken, options there were, hinted)

    def pick(self, options: Sequence[Any], hinted: bool) -> Any:
        at = len(self.trace)
        if at < len(self.prefix):
            taken = self.prefix[at]
        elif self.rng is None or hinted and self.rng.random() < HINT_TRUST:
            taken = 0
        else:
            taken = self.rng.randrange(len(options))
        self.trace.append((taken, len(options), hinted))
        return options[taken]

    def next_prefix(self) -> list[int] | None:
        """The choices of the next depth-first replay; None when every sequence of unhinted choices was tried."""
        for at in range(len(self.trace) - 1, -1, -1):
            taken, count, hinted = self.trace[at]
            if (self.every or not hinted) and taken + 1 < count:
                return [t for t, _, _ in self.trace[:at]] + [taken + 1]
        return None


class _ReplayRng:
    """The part of random.Random builds use (`sample`), drawn from the replay's decisions as one choice among the
    ordered samples, those the node's attributes spell (its axes, say) first."""

    def __init__(self, decisions: _Decisions, attrs: Mapping[str, Any]) -> None:
        self._decisions = decisions
        self._attrs = attrs

    def sample(self, population: Sequence[Any], k: int) -> list[Any]:
        pool = list(population)
        every = list(itertools.permutations(pool, k))
        hinted = [h for h in _spelled(self._attrs, len(pool), k) if h in every]
        return list(self._decisions.pick(list(dict.fromkeys(hinted + every)), bool(hinted)))


def _spelled(attrs: Mapping[str, Any], n: int, k: int) -> list[tuple[int, ...]]:
    """Index tuples of length k the attributes hold, taken modulo n (an axis may be written negative)."""
    found = []
    for value in attrs.values():
        items = value if isinstance(value, tuple) else (value,)
        if len(items) == k and all(isinstance(i, int) and not isinstance(i, bool) for i in items) and n:
            found.append(tuple(i % n for i in items))
    return found


class _Replay:
    """The BuildContext of one replay of node `index`: choices from `decisions`, weights from the node's inputs."""

    def __init__(self, index: int, node: Node, op: OpSpec, graph: Graph, dims: Mapping[str, tuple[z3.ArithRef, ...]],
                 decisions: _Decisions) -> None:
        self.decisions = decisions
        self.rng = _ReplayRng(decisions, node.attrs)
        self.constraints: list[z3.BoolRef] = []
        self._prefix = f"#{index}"  # no tensor's dim is named so
        self._node, self._graph, self._dims = node, graph, dims
        self._weights = list(node.inputs[op.arity:])
        self._count = 0

    def int_attr(self, name: str, lo: int, hi: int) -> z3.ArithRef:
        var = self._fresh(name)
        self.constraints += [var >= lo, var <= hi]
        return var

    def choice(self, name: str, options: Sequence[Any]) -> Any:
        return self.decisions.pick(*_ordered(options, self._node.attrs, name))

    def dim(self) -> z3.ArithRef:
        var = self._fresh("dim")
        self.constraints.append(var >= 1)
        return var

    def weight(self, rank: int, dtype: DType, lo: Any = None, hi: Any = None) -> SymTensor:
        if not self._weights:
            raise _Mismatch("more weights than the node reads")
        name = self._weights.pop(0)
        ttype = self._graph.types[name]
        if ttype.rank != rank or ttype.dtype is not dtype:
            raise _Mismatch(f"weight {name} is {ttype}")
        if lo is not None and hi is not None:
            # The weight keeps its values: the range the op allows at the new shapes must still cover them.
            recorded = self._graph.ranges.get(name)
            if recorded is None:
                raise _Mismatch(f"weight {name} has no recorded range")
            self.constraints += _truths([lo <= recorded[0], hi >= recorded[1]])
        return SymTensor(self._dims[name], dtype)

    @property
    def weights_left(self) -> int:
        return len(self._weights)

    def _fresh(self, name: str) -> z3.ArithRef:
        self._count += 1
        return z3.Int(f"{self._prefix}.{name}.{self._count}")


_ABSENT = object()


def _ordered(options: Sequence[Any], attrs: Mapping[str, Any], name: str) -> tuple[list[Any], bool]:
    """The distinct options (a repeated one only weights a random draw), those the attributes suggest first: the
    value of the attribute the choice is named after (`stride1` is `stride[1]`), that value with its axes written
    non-negative, the length of a tuple attribute (how many axes a reduction took), then the rest in order; and
    whether any was suggested."""
    distinct = list({(type(o), repr(o)): o for o in options}.values())
    recorded = _named_value(attrs, name)
    lengths = {len(v) for v in attrs.values() if isinstance(v, tuple)}
    bound = 1 + max((i for o in distinct for i in _ints(o)), default=0)  # axes options run over range(bound)

    def rank(option: Any) -> int:
        if _same(option, recorded):
            return 0
        if recorded is not _ABSENT and _ints(option) and _same(option, _modulo(recorded, bound)):
            return 1
        return 2 if type(option) is int and option in lengths else 3
    ordered = sorted(distinct, key=rank)
    return ordered, rank(ordered[0]) < 3


def _named_value(attrs: Mapping[str, Any], name: str) -> Any:
    """The attribute the choice `name` sets: attrs[name], or attrs[stem][i] for a name `<stem...>i`."""
    if name in attrs:
        return attrs[name]
    stem, digits = name.rstrip("0123456789"), name[len(name.rstrip("0123456789")):]
    for key, value in attrs.items():
        if digits and stem and key.startswith(stem) and isinstance(value, tuple) and int(digits) < len(value):
            return value[int(digits)]
    return _ABSENT


def _ints(value: Any) -> list[int]:
    """The ints of a non-negative int or tuple of them (no bools); empty for anything else."""
    items = value if isinstance(value, tuple) else (value,)
    ok = all(type(i) is int and i >= 0 for i in items) and items
    return list(items) if ok else []


def _modulo(value: Any, bound: int) -> Any:
    if type(value) is int:
        return value % bound
    if isinstance(value, tuple) and all(type(i) is int for i in value):
        return tuple(i % bound for i in value)
    return value


def _same(option: Any, recorded: Any) -> bool:
    return type(option) is type(recorded) and option == recorded


def _replay_node(index: int, node: Node, op: OpSpec, graph: Graph,
                 dims: Mapping[str, tuple[z3.ArithRef, ...]]) -> list[z3.BoolRef] | None:
    """The constraints of the first replay of the node's build that reproduces it; None when none does.

    Replays go depth first over the choices the attributes give no hint for (which settles most nodes), then depth
    first over every choice (a hint may be wrong), then through seeded random choice sequences: depth first alone
    would spend the budget below a wrong early guess (a reduction over one axis when the node reduced all of them).
    """
    data = [SymTensor(dims[n], graph.types[n].dtype) for n in node.inputs[:op.arity]]
    rng = random.Random(index)
    for every in (False, True):
        prefix: list[int] | None = []
        for _ in range(DEPTH_FIRST):
            decisions = _Decisions(prefix or [], every=every)
            found = _attempt(_Replay(index, node, op, graph, dims, decisions), op, node, graph, data, dims)
            if found is not None and _holds_as_recorded(found, node, graph, dims):
                return found
            prefix = decisions.next_prefix()
            if prefix is None:
                if every:  # every choice sequence was tried
                    return None
                break
    for _ in range(MAX_REPLAYS - 2 * DEPTH_FIRST):
        decisions = _Decisions([], rng)
        found = _attempt(_Replay(index, node, op, graph, dims, decisions), op, node, graph, data, dims)
        if found is not None and _holds_as_recorded(found, node, graph, dims):
            return found
    return None


def _attempt(replay: _Replay, op: OpSpec, node: Node, graph: Graph, data: list[SymTensor],
             dims: Mapping[str, tuple[z3.ArithRef, ...]]) -> list[z3.BoolRef] | None:
    """One replay's constraints (requirements, output dims, pinned attributes), or None when it is not the node."""
    try:
        build: Build | None = op.build(replay, *data)
    except Exception:  # _Mismatch, or a replay outside what the op's build expects: either way not this node
        return None
    if build is None or replay.weights_left or len(build.outputs) != len(node.outputs):
        return None
    found = list(replay.constraints)
    for out, name in zip(build.outputs, node.outputs, strict=True):
        ttype = graph.types[name]
        if out.rank != ttype.rank or out.dtype is not ttype.dtype:
            return None
        found += [d == e for d, e in zip(dims[name], out.shape, strict=True)]
    pins = _attr_pins(build.attrs, node.attrs)
    if pins is None:
        return None
    try:
        return _truths(list(build.requires) + found + pins)
    except _Mismatch:
        return None


def _attr_pins(built: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[z3.BoolRef] | None:
    """Constraints that make each built attribute equal its recorded value; None when one never can."""
    if set(built) != set(recorded):
        return None
    pins: list[z3.BoolRef] = []
    return pins if all(_pin(built[k], recorded[k], pins) for k in built) else None


def _pin(built: Any, recorded: Any, pins: list[z3.BoolRef]) -> bool:
    if isinstance(built, z3.ExprRef):
        if isinstance(recorded, bool) or not isinstance(recorded, int):
            return False
        pins.append(built == recorded)
        return True
    if isinstance(built, (tuple, list)):
        return (isinstance(recorded, tuple) and len(built) == len(recorded)
                and all(_pin(b, r, pins) for b, r in zip(built, recorded, strict=True)))
    return type(built) is type(recorded) and built == recorded


def _truths(terms: Sequence[Any]) -> list[z3.BoolRef]:
    """The z3 terms among `terms`; a plain True is dropped, a plain False makes the replay a mismatch."""
    kept = []
    for term in terms:
        if isinstance(term, z3.BoolRef):
            kept.append(term)
        elif not term:
            raise _Mismatch("a requirement is false")
    return kept


def _holds_as_recorded(found: list[z3.BoolRef], node: Node, graph: Graph,
                       dims: Mapping[str, tuple[z3.ArithRef, ...]]) -> bool:
    """Whether the replay's constraints hold with the node's tensors at their recorded shapes."""
    decided = _decided(found, [(d, z3.IntVal(v)) for name in (*node.inputs, *node.outputs)
                               for d, v in zip(dims[name], graph.types[name].shape, strict=True)
                               if not z3.is_int_value(d)])
    if decided is not None:
        return decided
    solver = z3.Solver()
    solver.set("rlimit", RLIMIT)
    solver.add(*found)
    for name in (*node.inputs, *node.outputs):
        solver.add(*_recorded(dims, graph, name))
    return solver.check() == z3.sat


def _decided(terms: Sequence[z3.BoolRef], pairs: list[tuple[z3.ArithRef, z3.IntNumRef]]) -> bool | None:
    """Whether `terms` hold with `pairs` substituted, where simplifying alone decides it; None where a solver must.

    A replay's own terms (an attribute, a free dim) are mostly pinned by an equation to a number; each such binding
    is substituted in turn. That settles most nodes at a fraction of a solver's cost: a solver check per node was
    two thirds of a lift's time."""
    whole = z3.And(*terms) if terms else z3.BoolVal(True)
    for _ in range(len(terms) + 1):
        whole = z3.simplify(z3.substitute(whole, *pairs) if pairs else whole)
        if z3.is_true(whole) or z3.is_false(whole):
            return z3.is_true(whole)
        left = whole.children() if z3.is_and(whole) else [whole]
        bound = [pair for term in left if (pair := _binding(term)) is not None]
        if not bound:
            return None
        pairs = list({pair[0].get_id(): pair for pair in bound}.values())
    return None


def _binding(term: z3.BoolRef) -> tuple[z3.ArithRef, z3.IntNumRef] | None:
    """(x, n) for a term `x == n` or `n == x`, x a free integer constant and n a number; else None."""
    if not z3.is_eq(term):
        return None
    left, right = term.children()
    for var, value in ((left, right), (right, left)):
        if z3.is_const(var) and not z3.is_int_value(var) and z3.is_int(var) and z3.is_int_value(value):
            return var, value
    return None
