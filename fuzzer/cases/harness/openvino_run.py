"""OpenVINO in a repro.py: the model converted by its PyTorch or its ONNX frontend as convsmith converted it, compiled
on the CPU plugin under the case's hints (OPTIONS' precision and performance), and run."""
import numpy as np

from fuzzer.cases.harness.export import export_upstream
from fuzzer.cases.harness.head import INPUT_NAMES, OPTIONS, TOLERANCES
from fuzzer.cases.harness.runtime import check_and_serialize, run_onnx


def openvino_version():
    import openvino as ov

    return ov.__version__


def plugin_tolerances():
    """The tolerances as convsmith judged the case: the CPU plugin computes float64 in float32 (it has no float64
    kernels), and float32 in bfloat16 under a bf16 precision hint."""
    TOLERANCES["float64"] = TOLERANCES["float32"]
    if OPTIONS["precision"] == "bf16":
        TOLERANCES["float32"] = TOLERANCES["bfloat16"]


def as_numpy(x):
    """A torch tensor or a numpy array as numpy (bfloat16 widened to float32, exactly)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        return (x.float() if str(x.dtype) == "torch.bfloat16" else x).numpy()
    return np.asarray(x)


def ov_input(x, element_type):
    """An input as an ov.Tensor of the model's input type: a bf16 input from the top halves of its float32 words."""
    import openvino as ov

    array = np.array(as_numpy(x), order="C")  # a copy that keeps a 0-d array 0-d
    if element_type == ov.Type.bf16 and array.dtype == np.float32:
        tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(array.shape)))
        tensor.data.view(np.uint16)[...] = (array.view(np.uint32) >> 16).astype(np.uint16)
        return tensor
    return ov.Tensor(array)


def from_ov(tensor):
    """An output as numpy: OpenVINO shows a bf16 tensor's words as float16, so they are widened to float32 here."""
    import openvino as ov

    data = np.array(tensor.data, copy=True)
    if tensor.get_element_type() == ov.Type.bf16:
        return (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return data


def compile_and_run(ov_model, inputs):
    """The model compiled on the CPU plugin under the case's hints, run on `inputs` (in the model's input order)."""
    import openvino as ov

    config = {"INFERENCE_PRECISION_HINT": OPTIONS["precision"], "PERFORMANCE_HINT": OPTIONS["performance"]}
    compiled = ov.Core().compile_model(ov_model, "CPU", config)
    request = compiled.create_infer_request()
    request.infer([ov_input(x, port.get_element_type()) for x, port in zip(inputs, compiled.inputs)])
    return [from_ov(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]


def convert_with_openvino_pytorch(module, inputs):
    """openvino-pytorch: (its model's outputs, no baseline, no ONNX model)."""
    import openvino as ov
    import torch

    if OPTIONS["capture"] == "export":
        # the leading dimension of each input of 2 or more rows as a hint, unless static (one entry per argument of
        # the script's module, whose forward names each input)
        hints = tuple({0: torch.export.Dim.AUTO} if x.dim() and x.shape[0] >= 2 else None for x in inputs)
        shapes = None if OPTIONS["static_shapes"] else hints
        program = torch.export.export(module, tuple(inputs), dynamic_shapes=shapes, strict=False)
        ov_model = ov.convert_model(program)
    else:
        given = {"input": [ov.PartialShape(list(x.shape)) for x in inputs]} if OPTIONS["static_shapes"] else {}
        ov_model = ov.convert_model(module, example_input=tuple(inputs), **given)
    return compile_and_run(ov_model, inputs), None, None


def read_onnx(upstream):
    """The ONNX frontend's model of upstream.onnx's bytes, read as OPTIONS' reader reads it."""
    import io

    import openvino as ov

    if OPTIONS["reader"] == "convert_model":
        return ov.convert_model(io.BytesIO(upstream))
    return ov.Core().read_model(upstream)


def in_model_order(ov_model, inputs):
    """The inputs in the model's order: by name (an exporter may drop an input no output reads), else in order."""
    by_name = dict(zip(INPUT_NAMES, inputs))
    names = [next((n for n in sorted(port.get_names()) if n in by_name), "") for port in ov_model.inputs]
    return [by_name[n] for n in names] if all(n in by_name for n in names) else list(inputs)[:len(names)]


def convert_with_openvino_onnx(upstream, inputs):
    """openvino-onnx: (its model's outputs, no baseline: the saved expected outputs are the comparison)."""
    ov_model = read_onnx(upstream)
    return compile_and_run(ov_model, in_model_order(ov_model, inputs)), None


def openvino_onnx_on_export(module, inputs):
    """openvino-onnx on the model the upstream exporter makes of the source (a case with no upstream.onnx saved: its
    worker died): (its model's outputs, the exported model's outputs, the exported model)."""
    upstream = check_and_serialize(export_upstream(module, inputs))
    ov_model = read_onnx(upstream)
    outputs = compile_and_run(ov_model, in_model_order(ov_model, inputs))
    return outputs, run_onnx(upstream, inputs), upstream
