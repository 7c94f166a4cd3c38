"""tf2onnx: the graph written as a TensorFlow model (a tf.function, or a Keras model) exported to ONNX, run in ONNX
Runtime and judged against TensorFlow eager on the same inputs.

The TensorFlow model is the one generators/tf_model.py renders from each operator's `tf_source`, with the source's
settled weights as constants. TensorFlow eager is the baseline and its float64 twin the reference, as the unconverted
model's run is for an ONNX tool; a TensorFlow model that fails, or whose outputs have other shapes or dtypes than the
graph's, is the source's failure (UpstreamError from "tensorflow"), never tf2onnx's.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, StageError, Steps, TargetRun, UpstreamError, share_export
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.setting import Hints, Setting
from fuzzer.support.quiet import library_output
from fuzzer.support.tensors import to_oracle_array
from generators.ir import Graph
from generators.ops.base import OpSpec
from oracles.verdict import Stage

TF2ONNX_OPSETS = (14, 18)  # tf2onnx 1.17's newest opsets (OPSET_TO_IR_VERSION ends at 18)
SOURCES = ("function", "keras")
TENSORFLOW = "tensorflow"  # the upstream a failing TensorFlow model is filed under (not tf2onnx's bug)


@dataclass(frozen=True)
class Tf2OnnxOptions(ConverterOptions):
    """From a tf.function or a Keras model, at an opset; tf2onnx's own ONNX optimizer off (`optimize=False`) is an
    argument of from_keras only, so it goes with source="keras"."""

    opset_range = TF2ONNX_OPSETS
    choices = {"source": SOURCES}
    opset: int = 15  # tf2onnx's preferred opset
    source: str = "function"
    optimize: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.optimize and self.source != "keras":
            raise ValueError("option optimize=False: tf2onnx.convert.from_function takes no optimizers; "
                             "use source='keras'")

    @classmethod
    def candidates(cls, name: str, drawn: Mapping[str, Any]) -> tuple[Any, ...]:
        if name == "optimize" and drawn.get("source", "function") != "keras":
            return (True,)
        return super().candidates(name, drawn)


def quiet_tensorflow() -> None:
    """TensorFlow's C++ logging off before its first import (it writes a screenful to stderr otherwise)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def import_quietly(name: str) -> Any:
    """The module `name`, its first import's logging (TensorFlow, absl, oneDNN notes) kept off the terminal."""
    quiet_tensorflow()
    if name not in sys.modules:
        with library_output():
            importlib.import_module(name)
    return sys.modules[name]


def quiet_availability(converter: Converter) -> tuple[bool, str]:
    """Converter.availability with TensorFlow's and LiteRT's import-time logging kept off the terminal."""
    quiet_tensorflow()
    with library_output():
        return Converter.availability(converter)


class Tf2Onnx(Converter[Tf2OnnxOptions]):
    name = "tf2onnx"
    display_name = "tf2onnx"
    project = "tf2onnx"
    distribution = "tf2onnx"
    tracker = "https://github.com/onnx/tensorflow-onnx/issues"
    framework = "tensorflow"
    libraries = ("tensorflow", "tf_keras", "tf2onnx", "onnxruntime")
    distributions = ("tensorflow", "tf-keras", "tf2onnx", "onnx", "onnxruntime")
    options_type = Tf2OnnxOptions
    # tf2onnx leaves a TensorFlow op it has no handler for in the graph (it logs "Tensorflow op [...] is not
    # supported"): ONNX's checker then finds no schema for it.
    unsupported_messages = (r"No Op registered for \w+ with domain_version",)
    source_harness = ("head", "numpy_tensors", "runtime", "judging", "child", "from_tensorflow")
    repro_conversion = "export_and_run_tf2onnx"

    def availability(self) -> tuple[bool, str]:
        return quiet_availability(self)

    def expressible(self, op: OpSpec) -> bool:
        """TensorFlow can write the operator: it has a TensorFlow source."""
        return op.has_tf_source()

    def expresses(self, graph: Graph) -> bool:
        """Every node has a TensorFlow source, and a kernel for its dtypes."""
        from generators.tf_model import tf_unsupported

        return tf_unsupported(graph) is None

    def repro_model(self, graph: Graph) -> Mapping[str, str]:
        """The graph as plain TensorFlow (`make_model(weights)`), and its weights read from the case folder."""
        from generators.tf_model import render_tf_model

        reads = "".join(f"{w!r}: load_tensor('weights/{w}.pb'), " for w in graph.weights)
        loader = f'def load_weights():\n    """The case\'s weights by name."""\n    return {{{reads}}}\n'
        # The script binds no `tf` of its own (its opening imports only what every script may need).
        model = render_tf_model(graph).replace("def make_model(weights):\n",
                                               "def make_model(weights):\n    import tensorflow as tf\n\n", 1)
        return {"make_model": model, "load_weights": loader}

    def snippet(self, options: Tf2OnnxOptions) -> Snippet:
        return Snippet(("import tf2onnx", *(("import tf_keras",) if options.source == "keras" else ())),
                       (*model_lines(options), export_line(options)))

    def component(self, site: FaultSite) -> Component:
        return self.own_component(f"tf2onnx: the conversion {site.named()}")

    def avoid_settings(self, options: Tf2OnnxOptions, hints: Hints) -> tuple[Setting, ...]:
        """tf2onnx's optimizer off (from a Keras model), the other kind of source, then the nearest opsets."""
        changes: list[tuple[str, dict[str, Any]]] = []
        if options.optimize:
            changes.append(("tf2onnx's optimizer off (optimizers={})", {"source": "keras", "optimize": False}))
        if options.source == "keras":
            changes.append(("the model as a tf.function", {"source": "function", "optimize": True}))
        else:
            changes.append(("the model as a Keras model", {"source": "keras"}))
        low, high = TF2ONNX_OPSETS
        opset = options.opset
        nearest = sorted((o for o in range(low, high + 1) if o != opset), key=lambda o: (abs(o - opset), -o))
        changes += [(f"opset {o}", {"opset": o}) for o in nearest[:2]]
        settings = []
        for what, changed in changes:
            new = Tf2OnnxOptions(**{**options.to_json(), **changed})
            settings.append(Setting(what, self.name, new.to_json(), export_line(new)))
        return tuple(settings)

    def export_upstream_model(self, source: Source, opset: int, steps: Steps) -> onnx.ModelProto:
        """tf2onnx's export of the graph's tf.function at `opset`, its optimizer on (its defaults): the ONNX tools
        start from it too, models of another exporter's making."""
        quiet_tensorflow()
        options = Tf2OnnxOptions(opset=opset)
        _, model, _ = tensorflow_model(source.graph, source_values(source), options, steps)
        with steps.at(Stage.NODE_CONVERSION, "export"):
            return self.export_model(model, source.graph, options)

    def convert_impl(self, source: Source, options: Tf2OnnxOptions) -> TargetRun:
        return share_export(source, self.name, options, lambda: self._convert(source, options))

    def _convert(self, source: Source, options: Tf2OnnxOptions) -> TargetRun:
        quiet_tensorflow()
        steps = Steps()
        values = source_values(source)
        fn, model, inputs = tensorflow_model(source.graph, values, options, steps)
        baseline = eager_outputs(fn, inputs, steps)
        reference = float64_outputs(source.graph, values, steps)
        with steps.at(Stage.NODE_CONVERSION, "export"):
            proto = self.export_model(model, source.graph, options)
        data = check_and_serialize(proto, steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data, baseline=baseline,
                         baseline_dtypes=source.output_dtypes, reference=reference)

    def export_model(self, model: Any, graph: Graph, options: Tf2OnnxOptions) -> onnx.ModelProto:
        """tf2onnx's call on the TensorFlow model (a test's planted converter changes what it returns)."""
        return export(model, graph, options)


@dataclass(frozen=True)
class SourceValues:
    """The source's weights and inputs as numpy (bfloat16 in float32 storage, which tf_arrays narrows back exactly),
    read once per conversion: the TensorFlow model, its eager run and its float64 twin all take them."""

    weights: Mapping[str, np.ndarray]
    inputs: tuple[np.ndarray, ...]


def source_values(source: Source) -> SourceValues:
    from generators.tf_model import module_weights

    return SourceValues(module_weights(source.module, source.graph), source_arrays(source))


def source_arrays(source: Source) -> tuple[np.ndarray, ...]:
    """The source's inputs as the oracle holds them (bfloat16 in float32 storage)."""
    return tuple(to_oracle_array(x)[0] for x in source.inputs)


def tensorflow_model(graph: Graph, values: SourceValues, options: Tf2OnnxOptions, steps: Steps
                     ) -> tuple[Any, Any, list[Any]]:
    """The graph as a Python function (run eagerly) and as the model the options export (a tf.function or a Keras
    model), and its inputs as TensorFlow tensors."""
    tf = import_quietly("tensorflow")
    from generators.tf_model import tf_arrays, tf_model

    try:
        with steps.at(Stage.SOURCE, "tf_model"):
            fn = tf_model(graph, tf_arrays(values.weights, graph))
            model = keras_model(fn, graph) if options.source == "keras" else tf.function(fn, autograph=False)
            feeds = tf_arrays(dict(zip(graph.inputs, values.inputs, strict=True)), graph)
            return fn, model, [tf.constant(feeds[n]) for n in graph.inputs]
    except StageError as exc:
        raise UpstreamError(exc.failure, TENSORFLOW) from exc


def eager_outputs(fn: Callable[..., Any], inputs: Sequence[Any], steps: Steps) -> tuple[np.ndarray, ...]:
    """The graph's function run eagerly: the baseline tf2onnx's model is judged against."""
    from generators.tf_model import oracle_array

    try:
        with steps.at(Stage.SOURCE, "tf_eager"):
            result = fn(*inputs)
            return tuple(oracle_array(y) for y in (result if isinstance(result, (tuple, list)) else (result,)))
    except StageError as exc:
        raise UpstreamError(exc.failure, TENSORFLOW) from exc


def float64_outputs(graph: Graph, values: SourceValues, steps: Steps) -> tuple[np.ndarray, ...] | None:
    """TensorFlow's float64 twin of the model; None where it does not run (the torch twin is the reference then)."""
    from generators.tf_model import run_tf_float64

    try:
        with steps.at(Stage.SOURCE, "tf_float64"):
            return run_tf_float64(graph, values.weights, values.inputs)
    except StageError:
        return None


def keras_model(fn: Callable[..., Any], graph: Graph) -> Any:
    """A functional Keras model around the graph's function, as a Keras user wraps TensorFlow code (a Lambda layer),
    its inputs at the graph's full shapes."""
    tf_keras = import_quietly("tf_keras")
    from generators.tf_model import tf_signature

    inputs = [tf_keras.Input(batch_shape=tuple(spec.shape), dtype=spec.dtype, name=spec.name)
              for spec in tf_signature(graph)]
    outputs = tf_keras.layers.Lambda(lambda xs: fn(*xs), autocast=False)(inputs)
    return tf_keras.Model(inputs, list(outputs) if isinstance(outputs, (tuple, list)) else [outputs])


def export(model: Any, graph: Graph, options: Tf2OnnxOptions) -> onnx.ModelProto:
    """tf2onnx's own call on the model, as export_line writes it."""
    tf2onnx = import_quietly("tf2onnx")
    from generators.tf_model import tf_signature

    signature = tf_signature(graph)
    if options.source == "keras":
        optimizers = None if options.optimize else {}
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=signature, opset=options.opset,
                                              optimizers=optimizers)
    else:
        proto, _ = tf2onnx.convert.from_function(model, input_signature=signature, opset=options.opset)
    return proto


def model_lines(options: Tf2OnnxOptions) -> tuple[str, ...]:
    """The user's lines that make `model` of `fn` and `signature`: a tf.function, or a Lambda layer between Inputs."""
    if options.source == "function":
        return ("model = tf.function(fn, autograph=False)",)
    return ("layer_inputs = [tf_keras.Input(batch_shape=s.shape, dtype=s.dtype, name=s.name) for s in signature]",
            "layer_outputs = tf_keras.layers.Lambda(lambda xs: fn(*xs), autocast=False)(layer_inputs)",
            "model = tf_keras.Model(layer_inputs, list(layer_outputs) if isinstance(layer_outputs, (tuple, list)) "
            "else [layer_outputs])")


def export_line(options: Tf2OnnxOptions) -> str:
    """The user's line that exports `model` (a tf.function or Keras model) given `signature` (its TensorSpecs)."""
    if options.source == "keras":
        optimizers = "" if options.optimize else ", optimizers={}"
        return (f"model, _ = tf2onnx.convert.from_keras(model, input_signature=signature, opset={options.opset}"
                f"{optimizers})")
    return f"model, _ = tf2onnx.convert.from_function(model, input_signature=signature, opset={options.opset})"
