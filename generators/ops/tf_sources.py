"""Helpers for writing an operator's TensorFlow source (OpSpec.tf_source): dtype sets TensorFlow's CPU kernels
take, and the spelling of calls, axes and constants in a dtype-generic way (the same text is the float64 twin)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from generators.dtypes import DType

# The dtypes TensorFlow's CPU kernels take, by kind of op (measured by tests/test_tf_sources.py).
TF_FLOATS = frozenset({DType.FLOAT32, DType.FLOAT64, DType.FLOAT16, DType.BFLOAT16})
TF_WIDE_INTS = frozenset({DType.INT32, DType.INT64})
TF_WIDE = TF_WIDE_INTS | {DType.FLOAT32, DType.FLOAT64}  # no 8-bit and no half-precision kernel
TF_SIGNED = TF_FLOATS | TF_WIDE_INTS | {DType.INT8}
TF_NUMERIC = TF_SIGNED | {DType.UINT8}
TF_ALL = TF_NUMERIC | {DType.BOOL}


def tf_dtype(dtype: DType | str) -> str:
    """`tf.float32` for a dtype (or its IR name)."""
    return f"tf.{DType(dtype).value}"


def tf_literal(value: Any) -> str:
    """Python source of an attribute value for TensorFlow calls: tuples become lists, inf/nan spelled out."""
    if isinstance(value, (tuple, list)):
        return f"[{', '.join(map(tf_literal, value))}]"
    if isinstance(value, float) and value != value:
        return "float('nan')"
    if isinstance(value, float) and abs(value) == float("inf"):
        return f"float({str(value)!r})"
    return repr(value)


def tf_call(qual: str, args: Sequence[str], *positional: Any, **kwargs: Any) -> str:
    """`qual(arg0, ..., <positional literals>, key=<literal>)` with tuples written as lists."""
    parts = [*args, *map(tf_literal, positional), *(f"{k}={tf_literal(v)}" for k, v in kwargs.items())]
    return f"{qual}({', '.join(parts)})"


def like(value: Any, x: str) -> str:
    """A scalar constant in the dtype of tensor `x` (never a hard-coded float32)."""
    return f"tf.cast({tf_literal(value)}, {x}.dtype)"


def axes(dims: Any, rank: int) -> list[int]:
    """Attribute `dims` (an int, a tuple, or None for every axis) as non-negative axes of a rank-`rank` tensor."""
    if dims is None:
        return list(range(rank))
    items = dims if isinstance(dims, (tuple, list)) else (dims,)
    return sorted({d % rank if rank else 0 for d in items})


def from_template(template: str, args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    """A TensorFlow function name applied to `args` (`tf.math.sin` -> `tf.math.sin(x)`), or a template over `{x}`,
    `{y}`, `{z}` (the args) and the attributes (their literals), e.g. `tf.where({x} > 0, {x}, {x} * {alpha})`."""
    if "{" not in template:
        return f"{template}({', '.join(args)})"
    return template.format(**dict(zip("xyz", args)), **{k: tf_literal(v) for k, v in attrs.items()})


def nan_kept(fn: str) -> str:
    """A template over {x} and {y} for a TensorFlow maximum/minimum that propagates NaN as torch does (TensorFlow's
    kernels return the other operand); `x != x` is false for integers, so it is dtype-generic."""
    return (f"tf.where(tf.math.not_equal({{x}}, {{x}}), {{x}}, tf.where(tf.math.not_equal({{y}}, {{y}}), {{y}}, "
            f"{fn}({{x}}, {{y}})))")


def nan_through(x: str, expr: str) -> str:
    """`expr` where `x` is not NaN, else NaN, as torch's clamps and max-like ops propagate it."""
    return f"tf.where(tf.math.not_equal({x}, {x}), {x}, {expr})"


def tf_axes(x: str, dim: Any) -> str:
    """A torch `dim` (None, an int or a tuple) as a TensorFlow `axis` for tensor `x`; torch also reduces a scalar
    along dim 0 or -1, where TensorFlow wants no axis."""
    if dim is None:
        return "None"
    return f"None if len({x}.shape) == 0 else {tf_literal(list(dim) if isinstance(dim, tuple) else dim)}"


# torch's integer and bool sums, products and scans accumulate in int64.
INT64_OPERAND = "({x} if {x}.dtype.is_floating else tf.cast({x}, tf.int64))"
TNP = "tf.experimental.numpy"  # numpy's semantics where torch follows numpy (tile, rot90, tril, moveaxis ...)


def shape_around(x: str, first: int, last: int, middle: Sequence[Any]) -> str:
    """`[*x.shape[:first], <middle>, *x.shape[last + 1:]]`: the new shape of a reshape replacing dims first..last
    (torch dims, negative counting from the back) of `x` by `middle`, for a rank read at run time."""
    head = f"*{x}.shape[:{first}], " if first else ""
    tail = f", *{x}.shape[{last + 1}:]" if last != -1 else ""
    return f"[{head}{', '.join(map(tf_literal, middle))}{tail}]"


def trailing_pads(x: str, pad: Sequence[int], value: Any, mode: str) -> str:
    """tf.pad of torch's F.pad list (pairs from the last dim back); negative pads crop first, as torch's do."""
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)][::-1]
    cropped = x
    if any(a < 0 or b < 0 for a, b in pairs):
        items = [f"{max(-a, 0) or ''}:{-max(-b, 0) or ''}" for a, b in pairs]
        cropped = f"{x}[..., {', '.join(items)}]"
    widths = tf_literal([[max(a, 0), max(b, 0)] for a, b in pairs])
    lead = f"[[0, 0]] * (len({x}.shape) - {len(pairs)}) + {widths}"
    fill = f", constant_values={like(value, x)}" if mode == "constant" else f", mode={mode.upper()!r}"
    return f"tf.pad({cropped}, {lead}{fill})"
