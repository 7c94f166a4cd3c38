"""Integer z3 terms made through the C API, for the generator's most frequent constraints.

z3's Python operators coerce and sort-check both operands with about ten ctypes calls per term, and a 10-node graph
makes some 450 terms. Given two integer terms, these make the very term the operator would (same function, same
argument order, the same reflected operator Python would pick) with two C calls, and without z3core's error check
after each (an integer comparison or product cannot fail; a null term still raises z3's error); anything else
(a Python int operand) goes through the operator itself. The solver must see exactly the terms it saw before, made
and freed at the same points: its answers depend on them, their ids included, and a seed must keep giving the same
graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import z3
from z3 import z3core


def _unchecked(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """The C function under one of z3core's wrappers, which ask z3 for its error code after every call (the
    wrapper itself where z3core is laid out otherwise)."""
    elementaries = (wrapper.__defaults__ or (None,))[-1]
    return getattr(elementaries, "f", wrapper)


_AST_ID = _unchecked(z3core.Z3_get_ast_id)
_INC_REF = _unchecked(z3core.Z3_inc_ref)
_MK_GE, _MK_LE, _MK_EQ = (_unchecked(f) for f in (z3core.Z3_mk_ge, z3core.Z3_mk_le, z3core.Z3_mk_eq))
_MK_MUL, _MK_OR, _MK_ITE = (_unchecked(f) for f in (z3core.Z3_mk_mul, z3core.Z3_mk_or, z3core.Z3_mk_ite))
_MK_CONST, _MK_INT64, _MK_INT_SORT = (_unchecked(f) for f in (z3core.Z3_mk_const, z3core.Z3_mk_int64,
                                                                z3core.Z3_mk_int_sort))

T = TypeVar("T", bound=z3.AstRef)


def _held(cls: type[T], ast: Any, ctx: z3.Context) -> T:
    """`cls(ast, ctx)`, held by one reference as z3's AstRef.__init__ holds it, without its error check; a term z3
    refused to make (sorts that do not match) raises z3's error as the checked call would."""
    if not ast:
        ref = ctx.ref()
        raise z3.Z3Exception(z3core.Z3_get_error_msg(ref, z3core.Z3_get_error_code(ref)))
    term = cls.__new__(cls)
    term.ast = ast
    term.ctx = ctx
    _INC_REF(ctx.ref(), ast)
    return term


def term_id(term: z3.AstRef) -> int:
    """`term.get_id()` without the error check: a live term's id cannot fail, and the generator asks hundreds."""
    return _AST_ID(term.ctx.ref(), term.ast)


def int_var(ctx: z3.Context, name: str) -> z3.ArithRef:
    """`z3.Int(name, ctx)`."""
    ref = ctx.ref()
    symbol = z3core.Z3_mk_string_symbol(ref, name)
    return _held(z3.ArithRef, _MK_CONST(ref, symbol, _MK_INT_SORT(ref)), ctx)


def _relation(mk: Callable[..., Any], mk_reflected: Callable[..., Any],
              fallback: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A comparison `a OP b` made as Python would make it: `mk` (or `mk_reflected` with swapped operands)."""

    def make(a: Any, b: Any) -> Any:
        if not (isinstance(a, z3.ArithRef) and isinstance(b, z3.ArithRef)):
            return fallback(a, b)
        if type(b) is not type(a) and isinstance(b, type(a)):
            # Python asks a right operand of a subclass (an IntNumRef) first: `x >= 1` is made as `1 <= x`.
            return _held(z3.BoolRef, mk_reflected(b.ctx.ref(), b.ast, a.ast), b.ctx)
        return _held(z3.BoolRef, mk(a.ctx.ref(), a.ast, b.ast), a.ctx)
    return make


ge = _relation(_MK_GE, _MK_LE, lambda a, b: a >= b)
le = _relation(_MK_LE, _MK_GE, lambda a, b: a <= b)
eq = _relation(_MK_EQ, _MK_EQ, lambda a, b: a == b)

_PAIR = z3.Ast * 2


def mul(a: Any, b: Any) -> Any:
    """`a * b`."""
    # No reflection here: Python prefers a subclass's __rmul__ only when it overrides it, and IntNumRef does not.
    if isinstance(a, z3.ArithRef) and isinstance(b, z3.ArithRef):
        return _held(z3.ArithRef, _MK_MUL(a.ctx.ref(), 2, _PAIR(a.ast, b.ast)), a.ctx)
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
    one = _held(z3.IntNumRef, _MK_INT64(ref, 1, _MK_INT_SORT(ref)), ctx)
    a_one = _held(z3.BoolRef, _MK_EQ(ref, a.ast, one.ast), ctx)
    b_one = _held(z3.BoolRef, _MK_EQ(ref, b.ast, one.ast), ctx)
    either = _held(z3.BoolRef, _MK_OR(ref, 3, (z3.Ast * 3)(same.ast, a_one.ast, b_one.ast)), ctx)
    return either, _held(z3.ArithRef, _MK_ITE(ref, a_one.ast, b.ast, a.ast), ctx)
