"""Integer z3 terms made through the C API, for the generator's most frequent constraints.

z3's Python operators coerce and sort-check both operands with about ten ctypes calls per term, and a 10-node graph
makes some 450 terms. Given two integer terms, these make the very term the operator would (same function, same
argument order, the same reflected operator Python would pick) with two calls; anything else (a Python int operand)
goes through the operator itself. The solver must see exactly the terms it saw before: its answers depend on them,
their ids included, and a seed must keep giving the same graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3
from z3 import z3core


def _unchecked(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """The C function under one of z3core's wrappers, which ask z3 for its error code after every call (the
    wrapper itself where z3core is laid out otherwise)."""
    elementaries = (wrapper.__defaults__ or (None,))[-1]
    return getattr(elementaries, "f", wrapper)


_AST_ID = _unchecked(z3core.Z3_get_ast_id)


def term_id(term: z3.AstRef) -> int:
    """`term.get_id()` without the error check: a live term's id cannot fail, and the generator asks hundreds."""
    return _AST_ID(term.ctx.ref(), term.ast)


def int_var(ctx: z3.Context, name: str) -> z3.ArithRef:
    """`z3.Int(name, ctx)`."""
    ref = ctx.ref()
    symbol = z3core.Z3_mk_string_symbol(ref, name)
    return z3.ArithRef(z3core.Z3_mk_const(ref, symbol, z3core.Z3_mk_int_sort(ref)), ctx)


def _relation(mk: Callable[..., Any], mk_reflected: Callable[..., Any],
              fallback: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A comparison `a OP b` made as Python would make it: `mk` (or `mk_reflected` with swapped operands)."""

    def make(a: Any, b: Any) -> Any:
        if not (isinstance(a, z3.ArithRef) and isinstance(b, z3.ArithRef)):
            return fallback(a, b)
        if type(b) is not type(a) and isinstance(b, type(a)):
            # Python asks a right operand of a subclass (an IntNumRef) first: `x >= 1` is made as `1 <= x`.
            return z3.BoolRef(mk_reflected(b.ctx.ref(), b.ast, a.ast), b.ctx)
        return z3.BoolRef(mk(a.ctx.ref(), a.ast, b.ast), a.ctx)
    return make


ge = _relation(z3core.Z3_mk_ge, z3core.Z3_mk_le, lambda a, b: a >= b)
le = _relation(z3core.Z3_mk_le, z3core.Z3_mk_ge, lambda a, b: a <= b)
eq = _relation(z3core.Z3_mk_eq, z3core.Z3_mk_eq, lambda a, b: a == b)

_PAIR = z3.Ast * 2


def mul(a: Any, b: Any) -> Any:
    """`a * b`."""
    # No reflection here: Python prefers a subclass's __rmul__ only when it overrides it, and IntNumRef does not.
    if isinstance(a, z3.ArithRef) and isinstance(b, z3.ArithRef):
        return z3.ArithRef(z3core.Z3_mk_mul(a.ctx.ref(), 2, _PAIR(a.ast, b.ast)), a.ctx)
    return a * b


def broadcast_dim(a: Any, b: Any) -> tuple[Any, Any]:
    """`(Or(eq(a, b), a == 1, b == 1), If(a == 1, b, a))`: two dims broadcast together, the requirement and the
    result, the very terms those expressions make (this pair is the most frequent of every graph)."""
    if not (isinstance(a, z3.ArithRef) and isinstance(b, z3.ArithRef)):
        return z3.Or(eq(a, b), a == 1, b == 1), z3.If(a == 1, b, a)
    ctx = a.ctx
    ref = ctx.ref()
    same = eq(a, b)
    # `a == 1` puts the numeral on the right whatever its class (an int operand is never reflected).
    one = z3.IntNumRef(z3core.Z3_mk_int64(ref, 1, z3core.Z3_mk_int_sort(ref)), ctx)
    a_one = z3.BoolRef(z3core.Z3_mk_eq(ref, a.ast, one.ast), ctx)
    b_one = z3.BoolRef(z3core.Z3_mk_eq(ref, b.ast, one.ast), ctx)
    either = z3.BoolRef(z3core.Z3_mk_or(ref, 3, (z3.Ast * 3)(same.ast, a_one.ast, b_one.ast)), ctx)
    return either, z3.ArithRef(z3core.Z3_mk_ite(ref, a_one.ast, b.ast, a.ast), ctx)
