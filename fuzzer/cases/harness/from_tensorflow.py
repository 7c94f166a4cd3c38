"""main of a repro.py whose source model is TensorFlow: the graph as plain TensorFlow code, exported with tf2onnx
as convsmith exported it, run in ONNX Runtime and compared with TensorFlow eager. Needs TensorFlow, tf2onnx, ONNX
Runtime and numpy; no torch."""
import os
import sys

import onnx
import onnxruntime as ort

from fuzzer.cases.harness.child import exit_status
from fuzzer.cases.harness.head import CASE, CONVERTER, INPUT_NAMES, OPTIONS, OUTPUT_NAMES
from fuzzer.cases.harness.judging import judge, judged, report_crash
from fuzzer.cases.harness.numpy_tensors import load_tensor, to_numpy
from fuzzer.cases.harness.runtime import check_and_serialize, run_onnx


def make_model(weights):
    """The case's graph: a repro.py has it here written as plain TensorFlow, one line per node."""
    raise NotImplementedError


def load_weights():
    """The case's weights by name: a repro.py reads each from weights/<name>.pb here."""
    return {}


def signature_of(inputs):
    """One tf.TensorSpec per input, named as the graph's inputs."""
    import tensorflow as tf

    return [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=n) for n, x in zip(INPUT_NAMES, inputs)]


def keras_model(fn, signature):
    """The graph's function as a Keras user wraps it: a Lambda layer between Inputs at the graph's full shapes."""
    import tf_keras

    inputs = [tf_keras.Input(batch_shape=tuple(s.shape), dtype=s.dtype, name=s.name) for s in signature]
    outputs = tf_keras.layers.Lambda(lambda xs: fn(*xs), autocast=False)(inputs)
    return tf_keras.Model(inputs, list(outputs) if isinstance(outputs, (tuple, list)) else [outputs])


def export_and_run_tf2onnx(fn, inputs):
    """tf2onnx on a tf.function or a Keras model of the graph, as OPTIONS say: (its model's outputs, its model)."""
    import tensorflow as tf
    import tf2onnx

    signature = signature_of(inputs)
    if OPTIONS["source"] == "keras":
        optimizers = None if OPTIONS["optimize"] else {}
        model, _ = tf2onnx.convert.from_keras(keras_model(fn, signature), input_signature=signature,
                                              opset=OPTIONS["opset"], optimizers=optimizers)
    else:
        function = tf.function(fn, autograph=False)  # straight-line code: nothing for AutoGraph to convert
        model, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=OPTIONS["opset"])
    data = check_and_serialize(model)
    return run_onnx(data, inputs), data


def convert_and_run(fn, inputs):
    """The case's conversion: the script defines it as the one its converter names (Converter.repro_conversion)."""
    raise NotImplementedError(f"repro.py names no conversion of {CONVERTER}")


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ notes would bury the outcome
    import tensorflow as tf

    inputs = [load_tensor(f"test_data_set_0/input_{i}.pb") for i in range(len(INPUT_NAMES))]
    saved = [to_numpy(load_tensor(f"test_data_set_0/output_{i}.pb")) for i in range(len(OUTPUT_NAMES))]
    fn = make_model({name: tf.constant(value) for name, value in load_weights().items()})
    eager = [to_numpy(y.numpy()) for y in fn(*(tf.constant(x) for x in inputs))]
    print(f"{CASE}: {CONVERTER} {OPTIONS}")
    print(f"tensorflow {tf.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    if judge(eager, saved, "saved expected") is None:
        print("TensorFlow eager matches the saved expected outputs")
    try:
        outputs, _ = convert_and_run(fn, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "an exported model that runs and matches TensorFlow eager")
    print("target vs TensorFlow eager:")
    return judged(judge(outputs, eager, "eager"))


if __name__ == "__main__":
    sys.exit(exit_status(main))
