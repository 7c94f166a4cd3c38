"""Every conversion of a tensor between torch, numpy and ONNX TensorProto bytes, in one place.

Two numpy forms of bfloat16 exist, on purpose: a case file keeps the real type (ml_dtypes.bfloat16), the oracle
compares in float32 storage (exact: bfloat16 is float32 with the low 16 bits zero).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import torch
from onnx import numpy_helper

from generators.dtypes import DType

_KNOWN_TORCH = frozenset(d.torch for d in DType)


def to_case_array(x: torch.Tensor | np.ndarray, dtype: str | None = None) -> np.ndarray:
    """A numpy copy for a case file: bfloat16 as ml_dtypes.bfloat16 (torch tensors keep their dtype; an oracle
    array in float32 storage becomes bfloat16 again when `dtype` says so)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            return x.float().numpy().astype(ml_dtypes.bfloat16)
        return x.numpy().copy()
    if dtype == "bfloat16" and x.dtype != ml_dtypes.bfloat16:
        return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)
    return np.asarray(x)


def to_oracle_array(x: torch.Tensor) -> tuple[np.ndarray, str]:
    """A torch tensor as the oracle compares it (bfloat16 in float32 storage) and its IR dtype name."""
    x = x.detach().cpu()
    name = DType.from_torch(x.dtype).value if x.dtype in _KNOWN_TORCH else f"?{x.dtype}"
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy(), name


def to_torch(x: np.ndarray, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """A numpy array (ml_dtypes.bfloat16 included) as a torch tensor of its own; 0-d arrays stay 0-d."""
    if x.dtype == ml_dtypes.bfloat16:
        tensor = torch.from_numpy(np.array(x, dtype=np.float32)).to(torch.bfloat16)
    else:
        tensor = torch.from_numpy(np.array(x, copy=True))
    return tensor if shape is None else tensor.reshape(shape)


def to_proto_bytes(name: str, x: torch.Tensor | np.ndarray) -> bytes:
    """A TensorProto named `name`, serialized (the ONNX test-case layout: input_0.pb, output_0.pb)."""
    return numpy_helper.from_array(to_case_array(x), name=name).SerializeToString()


def from_proto_bytes(data: bytes) -> tuple[str, np.ndarray]:
    """(name, array) from TensorProto bytes; raises ValueError on a truncated or foreign file."""
    proto = onnx.TensorProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError, a private type
        raise ValueError(f"not a TensorProto: {exc}") from None
    return proto.name, numpy_helper.to_array(proto)


def pack_arrays(arrays: Mapping[str, np.ndarray]) -> tuple[list[dict[str, Any]], bytes]:
    """Arrays as (an index of name, dtype, shape and byte range, their bytes back to back): a pickle-free wire form
    whose dtypes include ml_dtypes.bfloat16."""
    index, chunks, offset = [], [], 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).tobytes()
        index.append({"name": name, "dtype": array.dtype.name, "shape": list(array.shape), "offset": offset,
                      "nbytes": len(data)})
        chunks.append(data)
        offset += len(data)
    return index, b"".join(chunks)


def unpack_arrays(index: list[dict[str, Any]], data: bytes) -> dict[str, np.ndarray]:
    """The arrays of pack_arrays, each a copy of its own."""
    out = {}
    for entry in index:
        dtype = np.dtype(entry["dtype"])
        # Read in place (no slice of `data` copied first), then copied once: an array of its own, writable.
        flat = np.frombuffer(data, dtype=dtype, count=entry["nbytes"] // dtype.itemsize, offset=entry["offset"])
        out[entry["name"]] = flat.reshape(entry["shape"]).copy()
    return out
