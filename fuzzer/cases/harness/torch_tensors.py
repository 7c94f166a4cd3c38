"""Tensors of a repro.py that runs the source model: case files read as torch tensors, handed to ONNX Runtime."""
import os

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

from fuzzer.cases.harness.head import HERE


def load_tensor(rel):
    proto = onnx.TensorProto()
    with open(os.path.join(HERE, rel), "rb") as handle:
        proto.ParseFromString(handle.read())
    array = numpy_helper.to_array(proto)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True))  # keeps 0-d tensors 0-d


def _register(module, name, value):
    if value.is_floating_point():
        module.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
    else:
        module.register_buffer(name, value)


def to_numpy(x):
    x = x.detach().cpu()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


def ort_value(x):
    x = x.detach().cpu()
    if x.dtype == torch.bfloat16:
        words = x.contiguous().view(torch.int16).numpy().view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(x.contiguous().numpy())
