"""Tensors of a repro.py that runs in OpenVINO: the case's TensorProto files read with numpy alone (no onnx), as
numpy arrays or, for a script that runs the source model, as torch tensors."""
import os

import numpy as np
import torch

from fuzzer.cases.harness.head import HERE

# TensorProto's data types, as numpy stores them (bfloat16, 16, is widened to float32 by read_tensor).
TENSOR_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_,
                10: np.float16, 11: np.float64, 16: np.uint16}
BFLOAT16 = 16


def varint(data, at):
    """The protobuf varint at `at` and the position after it."""
    value, shift = 0, 0
    while True:
        byte = data[at]
        value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
        if byte < 0x80:
            return value, at


def read_tensor(rel):
    """A case file (a TensorProto with raw data, as convsmith writes them): (its array, whether it is bfloat16,
    which the array holds widened to float32, exactly)."""
    with open(os.path.join(HERE, rel), "rb") as handle:
        data = handle.read()
    dims, kind, raw, at = [], 1, b"", 0
    while at < len(data):
        key, at = varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(data, at)
            dims += [value] if field == 1 else []
            kind = value if field == 2 else kind
        elif wire == 2:
            size, at = varint(data, at)
            chunk, at = data[at:at + size], at + size
            raw = chunk if field == 9 else raw
            pos = 0
            while field == 1 and pos < len(chunk):  # packed dims
                value, pos = varint(chunk, pos)
                dims.append(value)
        else:
            at += 4 if wire == 5 else 8
    array = np.frombuffer(raw, dtype=TENSOR_TYPES[kind]).reshape(dims)
    if kind == BFLOAT16:
        return (array.astype(np.uint32) << 16).view(np.float32), True
    return array.copy(), False


def read_array(rel):
    """A case file as numpy (bfloat16 widened to float32)."""
    return read_tensor(rel)[0]


def load_tensor(rel):
    """A case file as a torch tensor (bfloat16 kept bfloat16)."""
    array, bfloat16 = read_tensor(rel)
    tensor = torch.from_numpy(np.array(array, copy=True))  # keeps 0-d tensors 0-d
    return tensor.to(torch.bfloat16) if bfloat16 else tensor


def _register(module, name, value):
    if value.is_floating_point():
        module.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
    else:
        module.register_buffer(name, value)


def to_numpy(x):
    x = x.detach().cpu()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
