"""The generator's z3 solver: the answers of z3's default solver without building its unused half.

z3's `Solver()` combines two: checks with assumptions (all of the generator's but a graph's last) go to its incremental
SMT solver; a check without them goes there too, and when that answers `unknown` short of the resource limit, to a
tactic solver over the same assertions, within what is left of the limit. Building and freeing the tactic solver cost
about 0.5 ms per graph, so here the SMT solver stands alone and the tactic solver is made only for such a retry.
The tactic solver held every asserted term, so they are held here too: a freed term's id would be reused, z3's
answers depend on term ids, and a seed must keep giving the same graph. `fresh_z3_context` gives each graph (generated,
or lifted back to z3 by generators/symbolic.py) a z3 context of its own.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import z3

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
KEPT_MEMORY_BYTES = 64 << 20
# The same settings for a process started afresh (glibc reads them at start): benchmarks give them to NNSmith too.
KEEP_FREED_MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": str(KEPT_MEMORY_BYTES),
                         "MALLOC_TRIM_THRESHOLD_": str(4 * KEPT_MEMORY_BYTES)}


class GraphSolver:
    """One graph's incremental solver: assert, check under assumptions, read the model or the unsat core."""

    def __init__(self, ctx: z3.Context, seed: int, rlimit: int) -> None:
        self.ctx = ctx
        self.seed = seed
        self.rlimit = rlimit
        self.smt = z3.SimpleSolver(ctx=ctx)
        self.smt.set("rlimit", rlimit)
        self.smt.set("random_seed", seed)
        self.asserted: list[z3.BoolRef] = []
        self.tactic: z3.Solver | None = None  # made on the first retry
        self.given = 0  # how many asserted terms the tactic solver has
        self.answered = self.smt  # the solver whose model, core and reason are the last check's

    def set_rlimit(self, rlimit: int) -> None:
        """z3 resource units per check from now on."""
        self.rlimit = rlimit
        self.smt.set("rlimit", rlimit)

    # z3's Solver.add and Solver.check re-cast every term through several Python layers; on graphs of a few nodes
    # that was a fifth of the generation time. These call the C API with the terms as they are.
    def assert_all(self, terms: Sequence[z3.BoolRef | bool]) -> None:
        ctx, solver = self.ctx.ref(), self.smt.solver
        for term in self._bools(terms):
            z3.Z3_solver_assert(ctx, solver, term.as_ast())
            self.asserted.append(term)

    def check(self, assumptions: Sequence[z3.BoolRef | bool]) -> z3.CheckSatResult:
        """Satisfiability of the assertions with `assumptions`, as z3's default solver answers it."""
        terms = self._bools(assumptions)
        before = 0 if terms else self._rlimit_count()
        result = self._check(self.smt, terms)
        self.answered = self.smt
        if terms or result != z3.unknown:
            return result
        left = self.rlimit - (self._rlimit_count() - before)
        if left <= 0:  # out of resources: the default solver stops here too
            return result
        return self._retry_with_tactic(left)

    def model(self) -> z3.ModelRef:
        return self.answered.model()

    def unsat_core_ids(self) -> set[int]:
        """The ids of the last check's unsat core, read without a Python term per element (as assert_all)."""
        ctx = self.ctx.ref()
        core = z3.Z3_solver_get_unsat_core(ctx, self.answered.solver)
        z3.Z3_ast_vector_inc_ref(ctx, core)
        try:
            return {z3.Z3_get_ast_id(ctx, z3.Z3_ast_vector_get(ctx, core, i))
                    for i in range(z3.Z3_ast_vector_size(ctx, core))}
        finally:
            z3.Z3_ast_vector_dec_ref(ctx, core)

    def reason_unknown(self) -> str:
        return self.answered.reason_unknown()

    def _retry_with_tactic(self, rlimit: int) -> z3.CheckSatResult:
        if self.tactic is None:
            self.tactic = z3.Tactic("default", self.ctx).solver()
            self.tactic.set("random_seed", self.seed)
        ctx, solver = self.ctx.ref(), self.tactic.solver
        for term in self.asserted[self.given:]:
            z3.Z3_solver_assert(ctx, solver, term.as_ast())
        self.given = len(self.asserted)
        self.tactic.set("rlimit", rlimit)
        self.answered = self.tactic
        return self._check(self.tactic, [])

    def _check(self, solver: z3.Solver, terms: list[z3.BoolRef]) -> z3.CheckSatResult:
        array = (z3.Ast * len(terms))(*(t.as_ast() for t in terms))
        return z3.CheckSatResult(z3.Z3_solver_check_assumptions(self.ctx.ref(), solver.solver, len(terms), array))

    def _rlimit_count(self) -> int:
        """Resource units the context has used so far (the limit of a check counts from where it starts)."""
        return int(self.smt.statistics().get_key_value("rlimit count"))

    def _bools(self, terms: Sequence[z3.BoolRef | bool]) -> list[z3.BoolRef]:
        """The terms as z3 booleans (a plain True from a build becomes one), held while the C API uses them."""
        return [t if isinstance(t, z3.BoolRef) else z3.BoolVal(t, self.ctx) for t in terms]


Z3Context = z3.Context  # for annotations outside generators/, which do not import z3


def unused_z3_context() -> z3.Context:
    """A new z3 context for a later graph (fresh_z3_context): made ahead, when a process has time to spare."""
    return z3.Context()


@contextmanager
def fresh_z3_context(unused: z3.Context | None = None) -> Iterator[None]:
    """Make z3's default context a new one for the duration of one graph: `unused` (a context made earlier, on
    which nothing was built: made when a process had time to spare, it saves ~3.5 ms, a fifth of a five-node graph)
    or one made now.

    z3's answers depend on every term its context has ever seen, so one shared context would make a graph
    depend on the graphs generated before it in the same process. Op specs build terms with z3.IntVal and
    friends without naming a context; swapping the default (and restoring it) keeps them deterministic.
    """
    saved = z3.z3._main_ctx
    z3.z3._main_ctx = unused if unused is not None else z3.Context()
    try:
        yield
    finally:
        z3.z3._main_ctx = saved


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory in this process for reuse; False where there is no glibc.

    Each graph's z3 context takes a few MiB in blocks large enough for malloc to map on their own and unmap on free,
    so every graph faulted ~1,000 fresh pages in (~2 ms of kernel time, a fifth of a five-node graph). The settings
    stop both the unmapping and the trimming of the heap's top; a process keeps its high-water mark, as a campaign
    worker does anyway.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    kept = mallopt(_M_MMAP_THRESHOLD, KEPT_MEMORY_BYTES)
    return bool(kept) and bool(mallopt(_M_TRIM_THRESHOLD, 4 * KEPT_MEMORY_BYTES))
