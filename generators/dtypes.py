"""The tensor element types convsmith generates, and their names in torch and numpy."""

from __future__ import annotations

import enum

import numpy as np
import torch


class DType(str, enum.Enum):
    """An element type; the value is the name used in graph.json."""

    FLOAT32 = "float32"
    FLOAT64 = "float64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    INT32 = "int32"
    INT64 = "int64"
    INT8 = "int8"
    UINT8 = "uint8"
    BOOL = "bool"

    @property
    def torch(self) -> torch.dtype:
        return _TORCH[self]

    @property
    def is_float(self) -> bool:
        return self in FLOATS

    @property
    def is_int(self) -> bool:
        return self in INTS

    @property
    def is_signed(self) -> bool:
        return self not in (DType.UINT8, DType.BOOL)

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that stores this type (bfloat16 has none: it is stored as float32)."""
        return np.dtype("float32") if self is DType.BFLOAT16 else np.dtype(self.value)

    @classmethod
    def from_torch(cls, dtype: torch.dtype) -> DType:
        return _FROM_TORCH[dtype]


_TORCH = {
    DType.FLOAT32: torch.float32,
    DType.FLOAT64: torch.float64,
    DType.FLOAT16: torch.float16,
    DType.BFLOAT16: torch.bfloat16,
    DType.INT32: torch.int32,
    DType.INT64: torch.int64,
    DType.INT8: torch.int8,
    DType.UINT8: torch.uint8,
    DType.BOOL: torch.bool,
}
_FROM_TORCH = {v: k for k, v in _TORCH.items()}

FLOATS: tuple[DType, ...] = (DType.FLOAT32, DType.FLOAT64, DType.FLOAT16, DType.BFLOAT16)
INTS: tuple[DType, ...] = (DType.INT32, DType.INT64, DType.INT8, DType.UINT8)
SIGNED_INTS: tuple[DType, ...] = (DType.INT32, DType.INT64, DType.INT8)
NUMERIC: tuple[DType, ...] = FLOATS + INTS
ALL: tuple[DType, ...] = NUMERIC + (DType.BOOL,)
