"""Elementwise binary arithmetic with NumPy broadcasting: add, sub, mul, div, floor division, pow, ..."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import torch

from generators.dtypes import ALL, FLOATS, INTS, NUMERIC, DType
from generators.ops.base import (
    INTS_PROMOTE,
    AttrMap,
    BroadcastBinary,
    OpSpec,
    clamp_penalty,
    excluded,
    same_sigs,
)
from generators.ops.discontinuity import Detector, Division, atan2, comparison, power, sign_bit
from generators.ops.onnx_nodes import ORT_FLOATS, ORT_NUMERIC
from generators.ops.tf_sources import TF_FLOATS, TF_NUMERIC, TF_WIDE, nan_kept

# ONNX Runtime's Max, Min and Mod take the 8-bit integers at every opset from 13 (Add, Mul, ... from 14 only).
ORT_ALL_INTS = ORT_NUMERIC | {DType.INT8, DType.UINT8}

TINY = 1e-3
INTEGER_POWERS = ("integer powers overflow at the smallest exponents (8 ** 22 wraps int64, 2 ** 8 uint8) and a "
                  "negative exponent raises")


class Binary(BroadcastBinary):
    """Arithmetic on two inputs of one dtype, broadcast together; output keeps the dtype."""

    family = "binary"
    # The Python operator the op's lambda applies (`a + b`); None: `fn` is a public torch function.
    symbol: ClassVar[str | None] = None

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        if self.symbol is None:
            return super().torch_source(attrs, args)
        a, b = args
        return f"{a} {self.symbol} {b}"


class NonzeroDivisor(Binary):
    """Division-like ops: the divisor must stay away from zero (and, for ints, be nonzero)."""

    nonzero_inputs = (1,)

    def domain_loss(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
        if not b.is_floating_point():
            # Not differentiable: a positive value tells the search to resample integer inputs.
            return (b == 0).sum().float()
        return torch.relu(TINY - b.float().abs()).sum()


class Pow(Binary):
    """x ** y: a negative base needs an integer exponent, and the result must not overflow."""

    input_domain = ((TINY, float("inf")), None)

    def domain_loss(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
        if not a.is_floating_point():
            return None
        af, bf = a.float(), b.float()
        magnitude = bf * torch.log(af.abs() + TINY)
        return clamp_penalty(a, lo=TINY) + torch.relu(magnitude - 8.0).sum()


def _bin(name: str, fn: Callable, dtypes=NUMERIC, base: type[Binary] = Binary, keeps_zeros: bool = False, *,
         symbol: str | None = None, discontinuity: Detector | None = None, onnx: str | None = None,
         onnx_types: frozenset[DType] = ORT_NUMERIC, onnx_attrs: Mapping[str, Any] | None = None,
         exclusions: Mapping[DType, str] = MappingProxyType({}), tf: str | None = None,
         tf_types: frozenset[DType] = TF_FLOATS) -> type[Binary]:
    """One binary op; `onnx`: the ONNX operator (with `onnx_attrs`) computing `fn`, run by ONNX Runtime for
    `onnx_types`; `exclusions`: the dtypes eager runs it for that `dtypes` leaves out, with why; `tf`: its
    TensorFlow source (OpSpec.tf_fn), run by TensorFlow's CPU kernels for `tf_types`."""
    # staticmethod: a detector that is a plain function (atan2, power) must not bind to the op as a method.
    return type(name, (base,), {"name": name, "fn": staticmethod(fn), "sigs": same_sigs(dtypes, 2),
                                "keeps_zeros": keeps_zeros, "symbol": symbol,
                                "discontinuity": staticmethod(discontinuity), "onnx_op": onnx,
                                "onnx_since": 1 if onnx else None, "onnx_types": onnx_types,
                                "onnx_attrs": dict(onnx_attrs or {}), "dtype_exclusions": exclusions,
                                "tf_fn": tf, "tf_types": tf_types})


OPS: list[type[OpSpec]] = [
    _bin("add", lambda a, b: a + b, ALL, symbol="+", onnx="Add",
         tf="tf.math.add", tf_types=TF_NUMERIC),  # on bools: or
    _bin("sub", lambda a, b: a - b, FLOATS + INTS, symbol="-", onnx="Sub",
         tf="tf.math.subtract", tf_types=TF_NUMERIC),
    _bin("mul", lambda a, b: a * b, ALL, keeps_zeros=True, symbol="*", onnx="Mul",
         tf="tf.math.multiply", tf_types=TF_NUMERIC),  # on bools: and
    _bin("div", lambda a, b: a / b, FLOATS, NonzeroDivisor, symbol="/", discontinuity=Division(), onnx="Div",
         onnx_types=ORT_FLOATS, exclusions=INTS_PROMOTE,
         tf="tf.math.divide"),
    _bin("floor_divide", lambda a, b: a // b, FLOATS + INTS, NonzeroDivisor, symbol="//",
         discontinuity=Division(integer=True),
         tf="tf.math.floordiv", tf_types=TF_NUMERIC),
    # Mod without fmod is Python's %, the divisor's sign, but ONNX takes it for integers only.
    _bin("remainder", lambda a, b: a % b, FLOATS + INTS, NonzeroDivisor, symbol="%",
         discontinuity=Division(integer=True), onnx="Mod", onnx_types=ORT_ALL_INTS - ORT_FLOATS,
         onnx_attrs={"fmod": 0},
         tf="tf.math.floormod", tf_types=TF_NUMERIC),
    _bin("fmod", torch.fmod, FLOATS + INTS, NonzeroDivisor, discontinuity=Division(integer=True),
         onnx="Mod", onnx_types=ORT_ALL_INTS, onnx_attrs={"fmod": 1},
         tf="tf.truncatemod", tf_types=TF_WIDE),
    _bin("pow", lambda a, b: a**b, FLOATS, Pow, symbol="**", discontinuity=power, onnx="Pow", onnx_types=ORT_FLOATS,
         exclusions=excluded(INTS, INTEGER_POWERS),
         tf="tf.math.pow"),
    _bin("maximum", torch.maximum, ALL, discontinuity=comparison, onnx="Max", onnx_types=ORT_ALL_INTS,
         tf=nan_kept("tf.math.maximum"), tf_types=TF_NUMERIC),
    _bin("minimum", torch.minimum, ALL, discontinuity=comparison, onnx="Min", onnx_types=ORT_ALL_INTS,
         tf=nan_kept("tf.math.minimum"), tf_types=TF_NUMERIC),
    _bin("atan2", torch.atan2, FLOATS, discontinuity=atan2, exclusions=INTS_PROMOTE,
         tf="tf.math.atan2"),
    _bin("hypot", torch.hypot, FLOATS,
         tf="tf.math.sqrt(tf.math.square({x}) + tf.math.square({y}))"),
    _bin("copysign", torch.copysign, FLOATS, discontinuity=sign_bit, exclusions=INTS_PROMOTE),
]
