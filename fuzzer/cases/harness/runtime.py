"""ONNX Runtime in a repro.py: a model checked and serialized, run as convsmith runs targets."""
import ctypes

import numpy as np
import onnx
import onnxruntime as ort

from fuzzer.cases.harness.head import DEVICE, INPUT_NAMES, ORT_LEVELS
from fuzzer.cases.harness.torch_tensors import ort_value  # numpy_tensors' in a repro.py without torch


def from_ort_value(value):
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    words = np.frombuffer(raw, dtype=np.uint16).reshape(value.shape())
    return (words.astype(np.uint32) << 16).view(np.float32)


def run_onnx(data, inputs, level="disabled"):
    """ONNX Runtime on DEVICE, one CPU thread, at an optimization level (as convsmith runs targets)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[level])
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if DEVICE == "cuda" else ["CPUExecutionProvider"]
    session = ort.InferenceSession(data, options, providers=providers)
    wanted = [i.name for i in session.get_inputs()]
    by_name = dict(zip(INPUT_NAMES, inputs))
    pairs = zip(wanted, [by_name[n] for n in wanted] if all(n in by_name for n in wanted) else inputs)
    values = session.run_with_ort_values(None, {n: ort_value(x) for n, x in pairs})
    return [from_ort_value(v) for v in values]


def check_and_serialize(model):
    data = model.SerializeToString()
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    return data


def transform(model):
    """The ONNX-to-ONNX converter under test: a repro.py has the converter's own call here."""
    return model


def export(module, inputs):
    """The exporter under test, called as its report snippet calls it: a repro.py has that call here."""
    raise NotImplementedError("repro.py has no call of the exporter")
