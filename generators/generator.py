"""The solver-backed graph generator: one incremental z3 solver per graph.

Dtypes and ranks are chosen in Python; dims and integer attributes are z3 integers. Each candidate op's
requirements (plus the element bound on every new tensor) are added to the solver unchecked, and the whole graph is
checked once at the end, with random target values for every attribute and input dim as assumptions (dropping the
unsat core), so the graph does not settle on z3's first answer. A graph that fails that check (a candidate that was
unsatisfiable, ~0.7% of them) is built again from its seed checking each candidate as assumptions and keeping it
only when satisfiable: a seed gives one graph either way.

Alongside shapes, the builder tracks what is known of each tensor's values (a bounded range, exact zeros that
no input can remove, the unit scale of a normalization) and never feeds such a tensor to an input whose domain
it cannot meet: an infeasible graph would only waste the input search's budget.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from generators.dtypes import ALL, DType
from generators.ir import Graph, Node, TensorType
from generators.ops.base import Build, OpBug, OpSpec, Sig, SymTensor, numel
from generators.registry import REGISTRY, OpRegistry
from generators.solver import GraphSolver, fresh_z3_context
from generators.terms import eq, ge, int_var, le, term_id


@dataclass(frozen=True)
class GenOptions:
    """What graphs to make: size, bounds, and which operators and dtypes may appear."""

    nodes: int = 10
    max_rank: int = 5
    max_dim: int = 64
    max_numel: int = 4096
    include_ops: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    dtypes: tuple[DType, ...] = ALL
    # (operator, dtype of its first input) pairs never to generate, e.g. what a converter's probe found unsupported.
    avoid_pairs: frozenset[tuple[str, str]] = frozenset()
    # Left out of this one graph: a campaign's known culprits, a random share per seed (fuzzer/campaign/novelty.py).
    # Kept apart from avoid_pairs, which is the same for many graphs and so is worth caching the operator table on.
    demoted_pairs: frozenset[tuple[str, str]] = frozenset()
    avoid_features: frozenset[str] = frozenset()  # OpSpec.features never to generate, e.g. a known crash's culprit
    # Drawn BOOST_WEIGHT times as often as other operators: patterns whose rewrite a campaign has not yet seen fire
    # (fuzzer/campaign/steering.py).
    boosted_ops: frozenset[str] = frozenset()
    forward_prob: float = 0.75
    new_input_prob: float = 0.15
    max_attempts_per_node: int = 40


BOOST_WEIGHT = 4  # a boosted operator is drawn as often as this many others
# A pattern is followed this often by its twin on the same inputs (_GraphBuilder.try_twin).
PATTERN_TWIN_PROB = 0.3
# z3 resource units per check (about a second of solving); a typical 10-node graph uses ~50k in all.
RLIMIT_PER_CHECK = 400_000


class GenerationError(RuntimeError):
    """The generator could not reach the requested size with these options."""


@dataclass
class _IntAttr:
    var: z3.ArithRef
    lo: int
    hi: int


@dataclass
class _Pending:
    """A node under construction: what build asked the context for."""

    prefix: str
    int_attrs: list[_IntAttr] = field(default_factory=list)
    weights: list[tuple[str, SymTensor]] = field(default_factory=list)
    new_inputs: list[tuple[str, SymTensor]] = field(default_factory=list)
    bounds: list[z3.BoolRef] = field(default_factory=list)
    ranges: dict[str, tuple[Any, Any]] = field(default_factory=dict)


class _Context:
    """The BuildContext the generator hands to OpSpec.build."""

    def __init__(self, gen: _GraphBuilder, pending: _Pending) -> None:
        self.rng = gen.rng
        self._gen = gen
        self._pending = pending

    def int_attr(self, name: str, lo: int, hi: int) -> z3.ArithRef:
        var = self._gen.named_int(f"{self._pending.prefix}.{name}")
        self._pending.int_attrs.append(_IntAttr(var, lo, hi))
        self._pending.bounds += [ge(var, self._gen.const(lo)), le(var, self._gen.const(hi))]
        return var

    def choice(self, name: str, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def dim(self) -> z3.ArithRef:
        var = self._gen.fresh_dim()
        self._pending.bounds += self._gen.dim_bounds(var)
        return var

    def weight(self, rank: int, dtype: DType, lo: Any = None, hi: Any = None) -> SymTensor:
        tensor = SymTensor(tuple(self.dim() for _ in range(rank)), dtype)
        self._pending.bounds.append(le(numel(tensor.shape), self._gen.const(self._gen.opts.max_numel)))
        name = self._gen.fresh_name("w")
        self._pending.weights.append((name, tensor))
        if lo is not None and hi is not None:
            self._pending.ranges[name] = (lo, hi)
        return tensor


@dataclass
class _NodeRecord:
    op: OpSpec
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]


class _GraphBuilder:
    """State of one graph under construction (one solver, one rng)."""

    def __init__(self, seed: int, opts: GenOptions, registry: OpRegistry = REGISTRY, optimistic: bool = False) -> None:
        self.rng = random.Random(seed)
        self.opts = opts
        self.optimistic = optimistic  # accept candidates unchecked; the final check verifies them all (_generate)
        self.z3ctx = z3.main_ctx()  # fresh per graph: see fresh_z3_context (generators/solver.py)
        # Element bounds over chains of 5-D tensors are nonlinear and can keep z3 busy for minutes. A resource
        # limit (not a time limit: that would make graphs depend on machine speed) turns such a candidate into
        # an `unknown`, which is rejected like an `unsat`.
        self.solver = GraphSolver(self.z3ctx, seed % (2**31), RLIMIT_PER_CHECK)
        self.tensors: dict[str, SymTensor] = {}
        self.placeholders: list[str] = []
        self.weights: list[str] = []
        self.records: list[_NodeRecord] = []
        self.int_attrs: list[_IntAttr] = []
        self.ranges: dict[str, tuple[Any, Any]] = {}
        self.value_ranges: dict[str, tuple[float, float]] = {}  # known bounds of a tensor's values
        self.needed: dict[str, tuple[float, float]] = {}  # placeholders' values must stay inside these
        self.zero_prone: set[str] = set()  # tensors that may hold zeros no input can remove
        self.bounded_dims: dict[int, z3.ArithRef] = {}  # dims with 1 <= d <= max_dim in the solver, by term id
        self.var_names: dict[int, str] = {}  # every variable's name by term id
        self.var_terms: list[z3.ArithRef] = []
        self.bounded_shapes: set[tuple[int, ...]] = set()  # shapes whose element bound is in the solver
        self.unit_scale: set[str] = set()  # tensors with an element of magnitude >= 1 whatever the input
        self.needs_nonzero: set[str] = set()  # placeholders that feed an input which must be nonzero
        self._counter = 0
        self._consts: dict[int, z3.ArithRef] = {}
        self.sig_table = operator_table(opts, registry)
        boosted = tuple(op for op in self.sig_table if op.name in opts.boosted_ops) if opts.boosted_ops else ()
        self.ops = tuple(self.sig_table) + boosted * (BOOST_WEIGHT - 1)
        if not self.ops:
            raise GenerationError("no operator accepts the allowed dtypes")

    # -- names and dims ---------------------------------------------------------------------------
    def fresh_name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def fresh_dim(self) -> z3.ArithRef:
        self._counter += 1
        return self.named_int(f"d{self._counter}")

    def named_int(self, name: str) -> z3.ArithRef:
        var = int_var(self.z3ctx, name)
        self.var_names[term_id(var)] = name
        self.var_terms.append(var)  # holding the term keeps its id from being reused
        return var

    def const(self, value: int) -> z3.ArithRef:
        """An integer constant made once per graph: z3's Python API would make a new term for every `x <= 64`."""
        term = self._consts.get(value)
        if term is None:
            term = self._consts[value] = z3.IntVal(value, self.z3ctx)
        return term

    def dim_bounds(self, var: z3.ArithRef) -> list[z3.BoolRef]:
        return [ge(var, self.const(1)), le(var, self.const(self.opts.max_dim))]

    def new_placeholder_type(self, rank: int, dtype: DType, pending: _Pending) -> SymTensor:
        shape = tuple(self.fresh_dim() for _ in range(rank))
        for d in shape:
            pending.bounds += self.dim_bounds(d)
        tensor = SymTensor(shape, dtype)
        pending.bounds.append(le(numel(shape), self.const(self.opts.max_numel)))
        return tensor

    # -- insertion ----------------------------------------------------------------------------------
    def allowed_sigs(self, op: OpSpec) -> tuple[Sig, ...]:
        return self.sig_table[op]

    def seed_placeholder(self) -> None:
        pending = _Pending("seed")
        dtype = self.rng.choice(self.opts.dtypes)
        rank = self.rng.randint(1, min(4, self.opts.max_rank))
        tensor = self.new_placeholder_type(rank, dtype, pending)
        self.solver.assert_all(pending.bounds)
        self.register_bounded([tensor])
        name = self.fresh_name("v")
        self.tensors[name] = tensor
        self.placeholders.append(name)

    def data_kinds(self) -> set[tuple[DType, int]]:
        """The (dtype, rank) of every tensor a node may take as data (weights are not)."""
        return {(t.dtype, t.rank) for n, t in self.tensors.items() if n not in self.weights}

    def pick_input(
        self, dtype: DType, ranks: tuple[int, ...], pending: _Pending, taken: list[str],
        domain: tuple[float, float] | None = None, nonzero: bool = False,
    ) -> tuple[str, SymTensor]:
        ranks = tuple(r for r in ranks if r <= self.opts.max_rank)
        # One tensor twice in a node (x - x, x / x) makes degenerate graphs no input can rescue.
        candidates = [
            n for n, t in self.tensors.items()
            if t.dtype is dtype and t.rank in ranks and n not in self.weights and n not in taken
            and _overlaps(self.value_ranges.get(n), domain) and not (nonzero and n in self.zero_prone)
            and not (_excludes_normalized(domain) and n in self.unit_scale)
        ]
        if candidates and self.rng.random() >= self.opts.new_input_prob:
            # Prefer recent tensors so graphs grow deep, not only wide.
            weights = [1.0 + i for i in range(len(candidates))]
            name = self.rng.choices(candidates, weights=weights)[0]
            return name, self.tensors[name]
        name = self.fresh_name("v")
        tensor = self.new_placeholder_type(self.rng.choice(ranks), dtype, pending)
        pending.new_inputs.append((name, tensor))
        return name, tensor

    def output_constraints(self, build: Build, pending: _Pending) -> tuple[list[SymTensor], list[z3.BoolRef]]:
        """Give every computed output dim a fresh variable (keeps later expressions small) and bound it.

        A dim that already is a bounded variable (elementwise ops, most shape ops pass dims through) is reused
        as it is, and a shape some tensor already has needs no second element bound: z3's Python API costs
        far more than its solving here, so every constraint not made is time saved.
        """
        outs: list[SymTensor] = []
        reqs: list[z3.BoolRef] = []
        for out in build.outputs:
            dims = []
            for expr in out.shape:
                # A live term's id is its own: no other term can have a bounded dim's id.
                if isinstance(expr, z3.ExprRef) and term_id(expr) in self.bounded_dims:
                    dims.append(expr)
                    continue
                var = self.fresh_dim()
                reqs += [eq(var, expr), *self.dim_bounds(var)]
                dims.append(var)
            if _shape_key(dims) not in self.bounded_shapes:
                reqs.append(le(numel(dims), self.const(self.opts.max_numel)))
            outs.append(SymTensor(tuple(dims), out.dtype))
        return outs, reqs

    def try_forward(self) -> bool:
        op = self.rng.choice(self.ops)
        sigs = self.allowed_sigs(op)
        kinds = self.data_kinds()
        fitting = [s for s in sigs if all(any((d, r) in kinds for r in rk) for d, rk in zip(s.ins, op.ranks))]
        # Mostly reuse what the graph has; sometimes open a new input of another dtype.
        if fitting and self.rng.random() >= self.opts.new_input_prob:
            sigs = fitting
        if not sigs:
            return False
        sig = self.rng.choice(sigs)
        pending = _Pending(self.fresh_name("n"))
        if op.arity == 0:
            inputs: list[tuple[str, SymTensor]] = []
        else:
            inputs = []
            domains = op.input_domain or (None,) * op.arity
            for i, (dt, rk, domain) in enumerate(zip(sig.ins, op.ranks, domains)):
                taken = [n for n, _ in inputs]
                inputs.append(self.pick_input(dt, rk, pending, taken, domain, op.needs_nonzero(i)))
        build = self.call_build(op, pending, [t for _, t in inputs])
        if build is None or build.outputs[0].dtype is not sig.out:
            return build is not None and self._bug(op, "first output dtype differs from the signature")
        outs, reqs = self.output_constraints(build, pending)
        constraints = pending.bounds + build.requires + reqs
        if not self.accept(constraints):
            return False
        for name, tensor in pending.new_inputs:
            self.tensors[name] = tensor
            self.placeholders.append(name)
        out_names = [self.fresh_name("v") for _ in outs]
        self.commit(op, pending, [n for n, _ in inputs], out_names, outs, build, at_front=False)
        if op.family == "pattern" and len(self.records) < self.opts.nodes and self.rng.random() < PATTERN_TWIN_PROB:
            self.try_twin(op, inputs)
        return True

    def try_twin(self, op: OpSpec, inputs: list[tuple[str, SymTensor]]) -> None:
        """A second node of the pattern `op` on the same data inputs, with attributes and weights of its own: ONNX
        Runtime's CommonSubexpressionElimination then merges the twins' common prefix, so a fusion meets an
        intermediate that another pattern still reads (how FastGeluFusion came to delete a Mul a second GELU read)."""
        pending = _Pending(self.fresh_name("n"))
        build = self.call_build(op, pending, [t for _, t in inputs])
        if build is None:
            return
        outs, reqs = self.output_constraints(build, pending)
        if not self.accept(pending.bounds + build.requires + reqs):
            return
        out_names = [self.fresh_name("v") for _ in outs]
        self.commit(op, pending, [n for n, _ in inputs], out_names, outs, build, at_front=False)

    def try_backward(self) -> bool:
        if not self.placeholders:
            return False
        target = self.rng.choice(self.placeholders)
        wanted = self.tensors[target]
        op = self.rng.choice(self.ops)
        sigs = [s for s in self.allowed_sigs(op) if s.out is wanted.dtype]
        if not sigs or not _overlaps(op.value_range, self.needed.get(target)):
            return False
        if op.emits_zeros and target in self.needs_nonzero:
            return False
        if op.unit_scale and _excludes_normalized(self.needed.get(target)):
            return False
        sig = self.rng.choice(sigs)
        pending = _Pending(self.fresh_name("n"))
        for dtype, ranks in zip(sig.ins, op.ranks):
            ranks = tuple(r for r in ranks if r <= self.opts.max_rank)
            if not ranks:
                return False
            tensor = self.new_placeholder_type(self.rng.choice(ranks), dtype, pending)
            pending.new_inputs.append((self.fresh_name("v"), tensor))
        build = self.call_build(op, pending, [t for _, t in pending.new_inputs])
        if build is None or build.outputs[0].rank != wanted.rank or build.outputs[0].dtype is not wanted.dtype:
            return False
        outs, reqs = self.output_constraints(build, pending)
        link = [eq(a, b) for a, b in zip(outs[0].shape, wanted.shape)]
        constraints = pending.bounds + build.requires + reqs + link
        if not self.accept(constraints):
            return False
        self.placeholders.remove(target)
        for name, tensor in pending.new_inputs:
            self.tensors[name] = tensor
            self.placeholders.append(name)
        extra = [self.fresh_name("v") for _ in outs[1:]]
        outs = [wanted] + outs[1:]
        in_names = [n for n, _ in pending.new_inputs]
        self.commit(op, pending, in_names, [target] + extra, outs, build, at_front=True)
        return True

    def accept(self, constraints: list[z3.BoolRef]) -> bool:
        """Try the candidate's constraints as assumptions; keep them only when satisfiable (unknown rejects).
        An optimistic builder keeps them unchecked."""
        if not constraints:  # nothing new (an elementwise op on bounded dims): the solver is still satisfiable
            return True
        if not self.optimistic and self.solver.check(constraints) != z3.sat:
            return False
        self.solver.assert_all(constraints)
        return True

    def call_build(self, op: OpSpec, pending: _Pending, inputs: list[SymTensor]) -> Build | None:
        ctx = _Context(self, pending)
        build = op.build(ctx, *inputs)
        if build is None:
            return None  # the op declined these inputs (e.g. a rank it cannot use here)
        if self.opts.avoid_features and \
                not self.opts.avoid_features.isdisjoint(op.features(build.attrs, [x.rank for x in inputs])):
            return None
        if not build.outputs:
            self._bug(op, "build returned no outputs")
        return build

    def register_bounded(self, tensors: list[SymTensor]) -> None:
        """Remember dims and shapes whose bounds are now in the solver (only accepted ones: see _shape_key)."""
        for tensor in tensors:
            for d in tensor.shape:
                self.bounded_dims[term_id(d)] = d  # holding the term keeps its id from being reused
            self.bounded_shapes.add(_shape_key(tensor.shape))

    def commit(self, op, pending, in_names, out_names, outs, build, at_front: bool) -> None:
        self.register_bounded([t for _, t in pending.weights] + [t for _, t in pending.new_inputs] + list(outs))
        for name, tensor in pending.weights:
            self.tensors[name] = tensor
            self.weights.append(name)
        for name, tensor in zip(out_names, outs):
            self.tensors[name] = tensor
        self.track_values(op, in_names[: op.arity], out_names)
        for i, name in enumerate(in_names[: op.arity]):
            domain = op.input_domain[i] if i < len(op.input_domain) else None
            if domain is not None and name in self.placeholders:
                self.needed[name] = domain
            if op.needs_nonzero(i) and name in self.placeholders:
                self.needs_nonzero.add(name)
        self.int_attrs += pending.int_attrs
        self.ranges.update(pending.ranges)
        record = _NodeRecord(op, list(in_names) + [n for n, _ in pending.weights], list(out_names), build.attrs)
        if at_front:
            self.records.insert(0, record)
        else:
            self.records.append(record)

    def track_values(self, op: OpSpec, data_in: list[str], out_names: list[str]) -> None:
        """What is known of the new outputs' values: a bounded range, and whether exact zeros may be there."""
        ranges = [self.value_ranges.get(n) for n in data_in]
        for name in out_names if op.preserves_values else out_names[:1]:
            if op.value_range is not None:
                self.value_ranges[name] = op.value_range
            elif op.preserves_values and data_in and None not in ranges:
                self.value_ranges[name] = (min(r[0] for r in ranges), max(r[1] for r in ranges))
            inherits = (op.preserves_values or op.keeps_zeros) and any(n in self.zero_prone for n in data_in)
            if op.emits_zeros or inherits:
                self.zero_prone.add(name)
            if op.unit_scale or (op.preserves_values and any(n in self.unit_scale for n in data_in)):
                self.unit_scale.add(name)
        for name in out_names[1:]:
            if self.tensors[name].dtype is DType.INT64:
                self.zero_prone.add(name)  # the indices of max/topk/sort/pool: 0 is always among them

    @staticmethod
    def _bug(op: OpSpec, what: str) -> bool:
        raise OpBug(f"operator {op.name}: {what}")

    # -- finishing ---------------------------------------------------------------------------------
    def spread_values(self) -> z3.ModelRef:
        """Ask for random attribute and input-dim values; drop the ones the solver rejects."""
        wishes: list[z3.BoolRef] = []
        for attr in self.int_attrs:
            wishes.append(eq(attr.var, self.const(self._spread(attr.lo, attr.hi))))
        for name in self.placeholders:
            for d in self.tensors[name].shape:
                wishes.append(eq(d, self.const(self._spread(1, min(self.opts.max_dim, 32)))))
        ids = [term_id(w) for w in wishes]
        for _ in range(8):
            result = self.solver.check(wishes)
            if result == z3.sat:
                return self.solver.model()
            core = self.solver.unsat_core_ids()
            if not core:
                if self.optimistic and result == z3.unsat:  # unsat whatever the wishes: a candidate was
                    raise _Unverified
                break
            wishes = [w for w, i in zip(wishes, ids) if i not in core]
            ids = [i for i in ids if i not in core]
        if self.optimistic:  # too hard for the limit, or wishes still in the way: one check without them
            if self.solver.check([]) == z3.sat:
                return self.solver.model()
            raise _Unverified
        # Every asserted constraint was satisfiable when added, so only the resource limit can stop this check:
        # the last try gets more room.
        self.solver.set_rlimit(RLIMIT_PER_CHECK * 25)
        if self.solver.check([]) == z3.sat:
            return self.solver.model()
        raise GenerationError(f"z3 gave up on the final model ({self.solver.reason_unknown()})")

    def _spread(self, lo: int, hi: int) -> int:
        # Small values are where most real models live, but large ones are where converters break.
        if hi - lo > 8 and self.rng.random() < 0.6:
            return self.rng.randint(lo, min(hi, lo + 3))
        return self.rng.randint(lo, hi)

    def to_graph(self) -> Graph:
        model = self.spread_values()

        values = _model_values(model)

        def val(expr: Any) -> Any:
            return self.concrete(expr, model, values)

        types = {n: TensorType(tuple(val(d) for d in t.shape), t.dtype) for n, t in self.tensors.items()}
        consumed = {n for r in self.records for n in r.inputs}
        produced = [n for r in self.records for n in r.outputs]
        outputs = tuple(n for n in produced if n not in consumed)
        nodes = tuple(
            Node(r.op.name, tuple(r.inputs), tuple(r.outputs), {k: val(v) for k, v in r.attrs.items()})
            for r in self.records
        )
        used = {n for node in nodes for n in node.inputs}
        inputs = {n: types[n] for n in self.placeholders if n in used}
        weights = {n: types[n] for n in self.weights}
        live = set(inputs) | set(weights) | {o for node in nodes for o in node.outputs}
        ranges = {n: (val(lo), val(hi)) for n, (lo, hi) in self.ranges.items()}
        return Graph(inputs, weights, nodes, outputs, {n: t for n, t in types.items() if n in live}, ranges)

    def concrete(self, expr: Any, model: z3.ModelRef, values: dict[str, int]) -> Any:
        """A dim or attribute (a z3 term, or tuples of them) with the model's values put in.

        A method, not a closure calling itself: such a closure is a reference cycle, which left this graph's whole
        z3 context to the garbage collector, freed at some later graph's expense.
        """
        name = self.var_names.get(term_id(expr)) if isinstance(expr, z3.ExprRef) else None
        if name is not None:
            return values.get(name, 1)  # a variable the constraints never pinned: any value in range works
        if isinstance(expr, z3.ExprRef):
            return model.eval(expr, model_completion=True).as_long()
        if isinstance(expr, (tuple, list)):
            return tuple(self.concrete(e, model, values) for e in expr)
        return expr


@functools.cache
def _sig_table(registry: OpRegistry, include: tuple[str, ...], exclude: tuple[str, ...], dtypes: tuple[DType, ...],
               avoid: frozenset[tuple[str, str]]) -> dict[OpSpec, tuple[Sig, ...]]:
    """Each selected operator's signatures within the allowed dtypes and not avoided; operators with none left out.
    Computed once per set of options: a campaign's avoided pairs (its probe's hundreds) are the same for every graph."""
    allowed = set(dtypes)
    table = {}
    for op in registry.select(include, exclude):
        sigs = tuple(s for s in op.sigs
                     if set(s.ins) | {s.out} <= allowed and (op.name, s.key_dtype.value) not in avoid)
        if sigs:
            table[op] = sigs
    return table


def operator_table(opts: GenOptions, registry: OpRegistry = REGISTRY) -> dict[OpSpec, tuple[Sig, ...]]:
    """The operators `opts` leave the generator to draw, each with its signatures within them."""
    return _without(_sig_table(registry, opts.include_ops, opts.exclude_ops, opts.dtypes, opts.avoid_pairs),
                    opts.demoted_pairs)


def admits_an_operator(opts: GenOptions, registry: OpRegistry = REGISTRY) -> bool:
    """Whether `opts` leave the generator an operator to draw (else generate raises GenerationError)."""
    return bool(operator_table(opts, registry))


def _without(table: dict[OpSpec, tuple[Sig, ...]], pairs: frozenset[tuple[str, str]]) -> dict[OpSpec, tuple[Sig, ...]]:
    """`table` without `pairs`: only the operators they name are filtered again (a few, for each graph)."""
    if not pairs:
        return table
    named = {op for op, _ in pairs}
    filtered = {}
    for op, sigs in table.items():
        if op.name in named:
            sigs = tuple(s for s in sigs if (op.name, s.key_dtype.value) not in pairs)
        if sigs:
            filtered[op] = sigs
    return filtered


def generate(seed: int, opts: GenOptions | None = None, registry: OpRegistry = REGISTRY,
             z3_context: z3.Context | None = None) -> Graph:
    """Make one valid random graph of `registry`'s operators; the same seed and options always give the same
    graph. `z3_context`: a fresh context made ahead, never used (generators/solver.fresh_z3_context)."""
    with fresh_z3_context(z3_context):
        return _generate(seed, opts or GenOptions(), registry)


def _generate(seed: int, opts: GenOptions, registry: OpRegistry) -> Graph:
    # Nearly every candidate is satisfiable, so building without a check per candidate and checking the whole graph
    # once (with the final model's wishes) saves most solver calls. Where that graph is unsat or too hard, the
    # seed's graph is built again checking every candidate; a seed gives one graph either way.
    try:
        return _build(seed, opts, registry, optimistic=True)
    except _Unverified:
        return _build(seed, opts, registry, optimistic=False)


class _Unverified(Exception):
    """An optimistic builder's graph failed its one check."""


def _build(seed: int, opts: GenOptions, registry: OpRegistry, optimistic: bool) -> Graph:
    builder = _GraphBuilder(seed, opts, registry, optimistic)
    builder.seed_placeholder()
    attempts = 0
    limit = opts.max_attempts_per_node * max(opts.nodes, 1)
    while len(builder.records) < opts.nodes and attempts < limit:
        attempts += 1
        if builder.rng.random() < opts.forward_prob:
            builder.try_forward()
        else:
            builder.try_backward()
    if not builder.records:
        raise GenerationError(f"no operator could be placed in {attempts} attempts")
    return _renamed(builder.to_graph())


def single_op_graph(op: OpSpec, dtype: DType, seed: int, attempts: int = 8,
                    registry: OpRegistry = REGISTRY) -> Graph | None:
    """A one-node graph of `op` whose first input (its output, for ops without inputs) has `dtype`; None when
    the generator cannot make one in `attempts` tries."""
    sigs = [s for s in op.sigs if s.key_dtype is dtype]
    allowed = tuple(dict.fromkeys([dtype] + [d for s in sigs for d in s.ins] + [s.out for s in sigs]))
    for attempt in range(attempts):
        try:
            graph = generate(seed * 1000 + attempt, GenOptions(nodes=1, include_ops=(op.name,), dtypes=allowed,
                                                                max_numel=256, max_dim=8), registry)
        except GenerationError:
            continue
        node = graph.nodes[0]
        first = node.inputs[0] if node.inputs else node.outputs[0]
        if node.op == op.name and graph.types[first].dtype is dtype:
            return graph
    return None


_DEFINE_INT = re.compile(r"\(define-fun (\S+) \(\) Int\s+(\(- \d+\)|\d+)\)")


def _model_values(model: z3.ModelRef) -> dict[str, int]:
    """Every integer constant of the model, read from its one-call text form.

    Asking z3's Python API for hundreds of values one by one costs more than generating the whole graph.
    """
    return {name: int(value.replace("(- ", "-").rstrip(")")) for name, value in _DEFINE_INT.findall(model.sexpr())}


def _shape_key(shape) -> tuple[int, ...]:
    """A shape's dims as sorted term ids: the element count does not depend on their order.

    Only shapes of accepted tensors are registered: a rejected candidate's bound never reached the solver, and
    an unregistered combination of bounded dims (a, c) may still be too large.
    """
    return tuple(sorted(term_id(d) for d in shape))


def _overlaps(values: tuple[float, float] | None, domain: tuple[float, float] | None) -> bool:
    """False only when a tensor's known value range and an input's domain cannot meet."""
    if values is None or domain is None:
        return True
    return values[0] < domain[1] and domain[0] < values[1]


def _excludes_normalized(domain: tuple[float, float] | None) -> bool:
    """A domain no wider than (-1, 1) or on one side of zero: a normalized tensor (zero mean, unit scale)
    never fits it."""
    return domain is not None and (domain[1] - domain[0] <= 2.0 or domain[0] >= 0 or domain[1] <= 0)


def _renamed(graph: Graph) -> Graph:
    """Rename tensors in definition order (inputs, weights, node outputs) so names read naturally."""
    mapping: dict[str, str] = {}
    for i, name in enumerate(graph.inputs):
        mapping[name] = f"in{i}"
    for i, name in enumerate(graph.weights):
        mapping[name] = f"w{i}"
    k = 0
    for node in graph.nodes:
        for name in node.outputs:
            mapping[name] = f"t{k}"
            k += 1

    def ren(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(mapping[n] for n in names)

    nodes = tuple(Node(n.op, ren(n.inputs), ren(n.outputs), dict(n.attrs)) for n in graph.nodes)
    return Graph(
        inputs={mapping[k]: v for k, v in graph.inputs.items()},
        weights={mapping[k]: v for k, v in graph.weights.items()},
        nodes=nodes,
        outputs=ren(graph.outputs),
        types={mapping[k]: v for k, v in graph.types.items()},
        ranges={mapping[k]: v for k, v in graph.ranges.items()},
    )
