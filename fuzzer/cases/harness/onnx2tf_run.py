"""onnx2tf in a repro.py that starts from upstream.onnx: the model converted into TensorFlow as convsmith converted it,
run as its Keras model or its float32 TFLite model (LiteRT), against upstream.onnx run in ONNX Runtime."""
import os
import sys

import numpy as np

from fuzzer.cases.harness.export import export_upstream
from fuzzer.cases.harness.head import INPUT_NAMES, OPTIONS
from fuzzer.cases.harness.runtime import check_and_serialize, data_inputs, run_onnx


def convert_with_onnx2tf(upstream, inputs):
    """onnx2tf: (its model's outputs, upstream.onnx's outputs with optimizations off)."""
    import tempfile

    import onnx

    baseline = run_onnx(upstream, inputs)
    model = onnx.load_from_string(upstream)
    input_names = [value.name for value in data_inputs(model.graph)]
    by_name = dict(zip(INPUT_NAMES, inputs))  # an exporter may drop an input no output reads
    arrays = ({n: by_name[n] for n in input_names} if all(n in by_name for n in input_names) else
              dict(zip(input_names, inputs)))
    arrays = {n: np.asarray(x) for n, x in arrays.items()}  # numpy, or the CPU torch tensors of a source script
    with tempfile.TemporaryDirectory() as out:
        path = os.path.join(out, "model.onnx")
        with open(path, "wb") as handle:
            handle.write(upstream)
        keras_model = onnx2tf_convert(path, out, model)
        if OPTIONS["target"] == "tflite":
            outputs = run_tflite(os.path.join(out, "model_float32.tflite"), arrays, model)
        else:
            names = [t.name.split(":")[0] for t in keras_model.inputs]
            values = [arrays[n] for n in names] if all(n in arrays for n in names) else list(arrays.values())
            result = keras_model(values if len(values) > 1 else values[0])
            outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    return [as_onnx_model(tf_output(y), b) for y, b in zip(outputs, baseline)], baseline


def onnx2tf_convert(path, out, model):
    """onnx2tf.convert on the model at `path` as convsmith called it: its Keras model (the .tflite files in `out`)."""
    import shutil

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ notes would bury the outcome
    import onnx2tf

    # onnx2tf moves rank 3 to 5 inputs to channels-last unless named in its documented option (no other rank)
    nchw_inputs = [v.name for v in data_inputs(model.graph) if len(v.type.tensor_type.shape.dim) in (3, 4, 5)]
    replacements = os.path.join(out, "no_replacements.json")  # replaces nothing: no fix search after a failure
    with open(replacements, "w") as handle:
        handle.write('{"operations": []}')
    # onnx2tf runs the onnxsim command it finds on PATH, and skips its pass without a word where there is none:
    # this interpreter's own scripts come first, as they did for convsmith
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), before) if p)
    try:
        if OPTIONS["onnxsim"] and not shutil.which("onnxsim"):
            raise ImportError("onnx2tf's onnxsim pass (onnxsim=True) needs the onnxsim command: pip install onnxsim")
        return onnx2tf.convert(input_onnx_file_path=path, output_folder_path=out, non_verbose=True,
                               keep_ncw_or_nchw_or_ncdhw_input_names=nchw_inputs,
                               not_use_onnxsim=not OPTIONS["onnxsim"],
                               copy_onnx_input_output_names_to_tflite=OPTIONS["target"] == "tflite",
                               disable_model_save=OPTIONS["target"] == "keras", param_replacement_file=replacements)
    except SystemExit as exc:  # onnx2tf logs why it cannot convert (above), then exits
        raise Onnx2TfExit(f"onnx2tf exited with status {exc.code}") from None
    finally:
        os.environ["PATH"] = before


class Onnx2TfExit(RuntimeError):
    """onnx2tf called sys.exit on a model it could not convert (the reason is in its log above)."""


def run_tflite(path, arrays, model):
    """The float32 .tflite in LiteRT's interpreter, fed as its input details declare, its outputs in the ONNX model's
    order."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():  # float16 inputs onnx2tf made float32 widened
        value = arrays[detail["name"]]
        wide = value.dtype == np.float16 and detail["dtype"] == np.float32
        value = value.astype(np.float32) if wide else value
        # a scalar as the .tflite declares it: onnx2tf makes a rank-0 input one of shape [1]
        interpreter.set_tensor(detail["index"], value.reshape(detail["shape"]) if value.ndim == 0 else value)
    interpreter.invoke()
    found = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}
    names = [o.name for o in model.graph.output]
    if all(n in found for n in names):
        return [found[n] for n in names]
    # Unnamed, they are Identity, Identity_1, ... in the ONNX model's output order.
    return [found[n] for n in sorted(found, key=unnamed_output_order)]


def unnamed_output_order(name):
    """Identity, Identity_1, ...: the model's order of outputs left unnamed; another name keeps its place."""
    suffix = name.rpartition("_")[2]
    return int(suffix) if "_" in name and suffix.isdigit() else 0


def onnx2tf_on_export(module, inputs):
    """onnx2tf on the model the upstream exporter makes of the source (a case with no upstream.onnx saved: its
    worker died): (its model's outputs, the exported model's outputs, the exported model)."""
    upstream = check_and_serialize(export_upstream(module, inputs))
    outputs, baseline = convert_with_onnx2tf(upstream, inputs)
    return outputs, baseline, upstream


def tf_output(value):
    """A TensorFlow or LiteRT output as numpy (bfloat16 widened to float32, as the baseline stores it)."""
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def as_onnx_model(array, baseline):
    """An output as the ONNX model gives it, where onnx2tf changes it by design: channels-last moved back, float16
    (which onnx2tf computes in float32) narrowed back."""
    array = channels_first(array, baseline.shape)
    return array.astype(np.float16) if baseline.dtype == np.float16 and array.dtype == np.float32 else array


def channels_first(array, shape):
    """An output onnx2tf left channels-last (its documented NHWC layout) moved back to the ONNX model's layout: the
    channel axis is 1 from rank 3 up, 0 at rank 2 (a (C, W) that onnx2tf gives as (W, C))."""
    if len(shape) < 2:
        return array
    axis = 1 if len(shape) >= 3 else 0
    last = (*shape[:axis], *shape[axis + 1:], shape[axis])
    return np.moveaxis(array, -1, axis) if array.shape != tuple(shape) and array.shape == last else array
