"""Tensors to and from ONNX TensorProto bytes (the ONNX test-case layout: input_0.pb, output_0.pb)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import torch
from onnx import numpy_helper


def torch_to_numpy(x: torch.Tensor) -> np.ndarray:
    """A numpy copy; bfloat16 becomes ml_dtypes.bfloat16 so the proto keeps its real type."""
    x = x.detach().cpu()
    if x.dtype == torch.bfloat16:
        return x.float().numpy().astype(ml_dtypes.bfloat16)
    return x.numpy().copy()


def tensor_to_proto_bytes(name: str, x: torch.Tensor) -> bytes:
    return numpy_helper.from_array(torch_to_numpy(x), name=name).SerializeToString()


def proto_bytes_to_numpy(data: bytes) -> tuple[str, np.ndarray]:
    """(name, array) from TensorProto bytes; raises ValueError on a truncated or foreign file."""
    proto = onnx.TensorProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError, a private type
        raise ValueError(f"not a TensorProto: {exc}") from None
    return proto.name, numpy_helper.to_array(proto)


def numpy_to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))
