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


def data_inputs(graph):
    """The graph's inputs that take data (some exporters list their initializers among the inputs too)."""
    initializers = {t.name for t in graph.initializer}
    return [value for value in graph.input if value.name not in initializers]


def run_onnx(data, inputs, level="disabled", free_dims=False, names=INPUT_NAMES):
    """ONNX Runtime on DEVICE, one CPU thread, at an optimization level (as convsmith runs targets); `free_dims`
    fixes each named input dimension to its size in `inputs`; `inputs` go by `names` where the model's match."""
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[level])
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    graph = onnx.load_from_string(data).graph
    wanted = [value.name for value in data_inputs(graph)]
    by_name = dict(zip(names, inputs))
    given = [by_name[n] for n in wanted] if all(n in by_name for n in wanted) else list(inputs)
    for value, x in zip(data_inputs(graph), given) if free_dims else ():
        for dim, size in zip(value.type.tensor_type.shape.dim, x.shape):
            if dim.dim_param:
                options.add_free_dimension_override_by_name(dim.dim_param, int(size))
    # TF32 off, as convsmith ran it: full float32 products
    cuda = ("CUDAExecutionProvider", {"use_tf32": "0"})
    providers = [cuda, "CPUExecutionProvider"] if DEVICE == "cuda" else ["CPUExecutionProvider"]
    session = ort.InferenceSession(data, options, providers=providers)
    wanted = [i.name for i in session.get_inputs()]
    pairs = zip(wanted, [by_name[n] for n in wanted] if all(n in by_name for n in wanted) else inputs)
    values = session.run_with_ort_values(None, {n: ort_value(x) for n, x in pairs})
    return [from_ort_value(v) for v in values]


def declared_names(upstream):
    """The names the tool's model is fed by: INPUT_NAMES, unless upstream.onnx renamed its inputs (then fed by
    position) and the tool may drop an unused one: then upstream.onnx's own, in order."""
    declared = tuple(value.name for value in data_inputs(onnx.load_from_string(upstream).graph))
    return INPUT_NAMES if set(declared) <= set(INPUT_NAMES) or len(declared) != len(INPUT_NAMES) else declared


def symbolic_inputs(data):
    """The model with every dimension of its inputs named and its intermediate shapes dropped (as convsmith's
    free_dims option runs it: a dynamic model, fixed again by name in the session)."""
    proto = onnx.load_from_string(data)
    for i, value in enumerate(data_inputs(proto.graph)):
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"in{i}_{k}"
    del proto.graph.value_info[:]
    return proto.SerializeToString()


def check_and_serialize(model, checked=True):
    """The model serialized; `checked`: it must pass ONNX's checker and strict shape inference too."""
    data = model.SerializeToString()
    model = onnx.load_from_string(data)
    if not checked:  # a model for ONNX Runtime alone: its session's load is the check
        return data
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return data


def transform(model):
    """The ONNX-to-ONNX converter under test: a repro.py has the converter's own call here."""
    return model


def export(module, inputs):
    """The exporter under test, called as its report snippet calls it: a repro.py has that call here."""
    raise NotImplementedError("repro.py has no call of the exporter")
