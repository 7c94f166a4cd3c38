"""Search for inputs and weights that keep every intermediate of the eager run free of NaN and Inf.

Most graphs pass on the first random draw. When one does not, the search runs the graph node by node with
float32 master copies of every float leaf (inputs and weights), finds the first node out of its domain
(its `domain_loss` is positive: log of a non-positive, division by near zero, ...) or overflowing, and
follows the gradient of that penalty (for an overflow, of the magnitude of its inputs) with sign steps, drawing
again when the walk stalls on a node.
Integer leaves cannot follow a gradient: a positive integer loss or an eager error draws them again.
Everything is seeded and bounded by a time budget.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import torch

from generators.ir import Graph
from generators.materialize import GraphModule, random_inputs, random_tensor
from generators.values import ValueStrategy

OVERFLOW_BOUND = 4.0  # where the magnitude penalty pushes inputs of an overflowing node
STEP = 0.15
# A search that has not succeeded in this many steps seldom does, while the searches that never succeed run every
# step they are given and are the feeder's longest preparations (a worker waits for them): a tighter cap costs
# almost no valid inputs and cuts those waits (bench/generate.py times the search).
MAX_STEPS = 100
# A gradient walk whose loss fell by less than a fifth in a step is settling short of zero (its step shrinks each
# time): most such walks never get there, and a fresh draw then succeeds at once, so the search redraws.
STALL = 0.8


@dataclass
class FoundInputs:
    """The search result: inputs by name, the weights it settled on, and how it went."""

    inputs: dict[str, torch.Tensor]
    weights: dict[str, torch.Tensor]
    valid: bool
    steps: int
    seconds: float


@dataclass
class _Leaves:
    """Float32 (or float64) master copies of float leaves; integer leaves kept as they are."""

    masters: dict[str, torch.Tensor]
    fixed: dict[str, torch.Tensor]
    dtypes: dict[str, torch.dtype]

    @classmethod
    def of(cls, values: dict[str, torch.Tensor], frozen: Collection[str] = ()) -> _Leaves:
        """Float leaves become searchable masters, except `frozen` ones (those with a declared value range)."""
        masters, fixed, dtypes = {}, {}, {}
        for name, v in values.items():
            dtypes[name] = v.dtype
            if v.is_floating_point() and name not in frozen:
                wide = torch.float64 if v.dtype == torch.float64 else torch.float32
                masters[name] = v.detach().to(wide).requires_grad_(True)
            else:
                fixed[name] = v
        return cls(masters, fixed, dtypes)

    def values(self) -> dict[str, torch.Tensor]:
        out = {n: m.to(self.dtypes[n]) for n, m in self.masters.items()}
        out.update(self.fixed)
        return out

    def frozen(self) -> dict[str, torch.Tensor]:
        return {n: v.detach().clone() for n, v in self.values().items()}


class _Violation(NamedTuple):
    """The first node out of its domain or overflowing: the float loss to follow (None when there is none to follow),
    whether an integer leaf needs a new draw, and the node's index (-1 when every node is fine)."""

    loss: torch.Tensor | None
    int_trouble: bool
    at: int


_NO_VIOLATION = _Violation(None, False, -1)


def _first_violation(module: GraphModule, env: dict[str, torch.Tensor]) -> _Violation:
    """Run nodes until the first one out of its domain or overflowing.

    Only the first violation is optimised: everything upstream of it is finite, so its gradient is clean, while a
    loss summed past a NaN would poison every gradient with 0 * NaN.
    """
    graph = module.graph
    for at, (node, op, attrs) in enumerate(zip(graph.nodes, module._ops, module._attrs)):
        xs = [env[n] for n in node.inputs]
        penalty = op.domain_loss(attrs, *xs)
        if penalty is not None and float(penalty.detach()) > 0:
            if not penalty.requires_grad:
                return _Violation(None, True, at)
            return _Violation(penalty.float(), False, at)
        result = op.forward(attrs, *xs)
        outs = result if isinstance(result, (tuple, list)) else (result,)
        for name, value in zip(node.outputs, outs):
            env[name] = value
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                floats = [x for x in xs if x.is_floating_point() and x.requires_grad]
                if not floats:
                    return _Violation(None, True, at)
                return _Violation(sum(torch.relu(x.float().abs() - OVERFLOW_BOUND).sum() for x in floats), False, at)
    return _NO_VIOLATION


# Integer redraws alternate signed, positive-only and negative-only draws: a divisor drawn from [-8, 8] holds a
# zero almost surely once it has a few dozen elements, one drawn from [1, 8] never does.
INT_RANGE_SHAPES = ((-8, 8), (1, 8), (-8, -1), (1, 3))


def _redraw_ints(graph: Graph, leaves: _Leaves, gen: torch.Generator, attempt: int) -> None:
    shape = INT_RANGE_SHAPES[attempt % len(INT_RANGE_SHAPES)]
    for name in leaves.fixed:
        ttype = graph.types[name]
        if name in graph.ranges:
            value_range = graph.ranges[name]
        elif ttype.dtype.is_int and ttype.dtype.is_signed:
            value_range = shape
        else:
            value_range = (max(shape[0], 0), max(shape[1], 1)) if ttype.dtype.is_int else None
        leaves.fixed[name] = random_tensor(ttype, gen, value_range)


# Fallback ranges by shape: symmetric, positive-only and negative-only, each shrinking with the attempt, so
# a path with no gradient (floor, round, comparisons) still gets tried on both sides of zero.
RANGE_SHAPES = ((-1.0, 1.0), (0.0, 1.0), (-1.0, 0.0), (0.5, 1.0))


def _redraw_floats(graph: Graph, leaves: _Leaves, gen: torch.Generator, attempt: int) -> None:
    scale = 2.0 * 0.6 ** (attempt // len(RANGE_SHAPES))
    shape_lo, shape_hi = RANGE_SHAPES[attempt % len(RANGE_SHAPES)]
    for name, master in leaves.masters.items():
        ttype = graph.types[name]
        lo, hi = graph.ranges.get(name, (shape_lo * scale, shape_hi * scale))
        fresh = random_tensor(ttype, gen, (lo, hi)).to(master.dtype)
        leaves.masters[name] = fresh.requires_grad_(True)


def _step(leaves: _Leaves, loss: torch.Tensor, size: float) -> bool:
    """One normalised gradient step on every float leaf; False when the gradient is unusable."""
    masters = list(leaves.masters.values())
    if not masters or not loss.requires_grad:
        return False
    try:
        grads = torch.autograd.grad(loss, masters, allow_unused=True)
    except RuntimeError:  # an op on the path has no derivative (floor_divide, ...)
        return False
    moved = False
    with torch.no_grad():
        for master, grad in zip(masters, grads):
            if grad is None:
                continue
            # Sign steps move every offending element by the same amount, however deep in the graph it is
            # (plain gradients through log/exp chains vanish or explode).
            direction = torch.nan_to_num(grad, nan=0.0).sign()
            if bool(direction.any()):
                master -= size * direction * master.abs().clamp(min=0.5)
                moved = True
    return moved


def find_valid_inputs(module: GraphModule, seed: int, budget_s: float = 1.0, max_steps: int = MAX_STEPS,
                      values: ValueStrategy = ValueStrategy.UNIFORM) -> FoundInputs:
    """Inputs (and weights) with a NaN/Inf-free eager run, searched from `seed` within `budget_s` seconds; the first
    draw follows the value strategy, the search's own redraws are uniform."""
    with _one_thread():
        return _search(module, seed, budget_s, max_steps, values)


@contextmanager
def _one_thread() -> Iterator[None]:
    """torch's intra-op threads off for the search, then as they were.

    Tensors here hold at most a few thousand elements, where a parallel kernel never pays, and on a busy machine
    (a campaign's workers, other jobs) each kernel's thread hand-off waited milliseconds: a conv2d took 24 ms instead
    of 0.08 ms. The values found are the same (checked on 120 graphs of 10 and 20 nodes against two threads).
    """
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _search(module: GraphModule, seed: int, budget_s: float, max_steps: int, values: ValueStrategy) -> FoundInputs:
    graph = module.graph
    start = time.perf_counter()
    gen = torch.Generator().manual_seed(seed + 104729)
    weights = {n: getattr(module, n).detach() for n in graph.weights}
    drawn = random_inputs(graph, seed, values)
    if _first_draw_valid(module, {**drawn, **weights}):  # most graphs: no master copies, no autograd bookkeeping
        kept = {n: w.clone() for n, w in weights.items()}  # the module's own values: nothing to load back
        return FoundInputs(drawn, kept, True, 1, time.perf_counter() - start)
    leaves = _Leaves.of({**drawn, **weights}, frozen=set(graph.ranges))
    redraws = int_redraws = 0
    size = STEP
    last = _FRESH  # the node the walk follows and its loss before this step
    for step in range(max_steps):
        env = leaves.values()
        try:
            loss, int_trouble, at = _first_violation(module, env)
        except RuntimeError:  # e.g. integer division by zero: only a new draw helps
            loss, int_trouble, at = None, True, -1
        if loss is None and not int_trouble:
            return _found(module, leaves, True, step + 1, start)
        if time.perf_counter() - start > budget_s:
            break
        size *= 0.85  # a shrinking step settles instead of oscillating between two domain edges
        if int_trouble:
            int_redraws += 1
            _redraw_ints(graph, leaves, gen, int_redraws)
            if step % 4 == 3:
                redraws += 1
                _redraw_floats(graph, leaves, gen, redraws)
            last = _FRESH
            continue
        assert loss is not None  # no violation returned above, and an integer one drew again
        walked = (at, float(loss.detach()))
        if size < 0.01 or _stalled(walked, last) or not _step(leaves, loss, size):
            redraws += 1
            size = STEP
            _redraw_floats(graph, leaves, gen, redraws)
            last = _FRESH
        else:
            last = walked
    return _found(module, leaves, _is_valid(module, leaves), max_steps, start)


_FRESH = (-1, float("inf"))  # no walk under way: a new draw, or none yet


def _stalled(now: tuple[int, float], last: tuple[int, float]) -> bool:
    """Whether the last step took the same node's loss (node index, loss) down by less than STALL asks (a walk that
    moved on to a later node has made progress)."""
    return now[0] == last[0] and now[1] > STALL * last[1]


def _first_draw_valid(module: GraphModule, values: dict[str, torch.Tensor]) -> bool:
    """The search's first step on the drawn values as they are: the verdict its master copies would get (a float16
    value survives the round trip through float32 exactly), and no random draw taken."""
    with torch.no_grad():
        try:
            return _first_violation(module, values).at == -1
        except RuntimeError:
            return False


def _is_valid(module: GraphModule, leaves: _Leaves) -> bool:
    """Whether the last step (taken after the last check) happened to land on valid values."""
    try:
        violation = _first_violation(module, leaves.values())
    except RuntimeError:
        return False
    return violation.at == -1


def _found(module: GraphModule, leaves: _Leaves, valid: bool, steps: int, start: float) -> FoundInputs:
    values = leaves.frozen()
    inputs = {n: values[n] for n in module.graph.inputs}
    weights = {n: values[n] for n in module.graph.weights}
    if valid:
        module.load_weights(weights)
    return FoundInputs(inputs, weights, valid, steps, time.perf_counter() - start)
