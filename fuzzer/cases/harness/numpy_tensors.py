"""Tensors of a repro.py that starts from upstream.onnx and needs no torch: case files read as numpy arrays."""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from fuzzer.cases.harness.head import HERE


def load_tensor(rel):
    proto = onnx.TensorProto()
    with open(os.path.join(HERE, rel), "rb") as handle:
        proto.ParseFromString(handle.read())
    return np.array(numpy_helper.to_array(proto), copy=True)  # bfloat16 arrives as ml_dtypes.bfloat16


def to_numpy(x):
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def ort_value(x):
    # np.asarray(order="C"), not np.ascontiguousarray: that makes a 0-d input one of shape (1,)
    if x.dtype.name == "bfloat16":
        words = np.asarray(x, order="C").view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(np.asarray(x, order="C"))
