"""onnx2tf: the upstream ONNX model converted into TensorFlow (the Keras model onnx2tf returns, or the float32 TFLite
model it writes), run there and judged against the upstream model's run in ONNX Runtime with optimizations off.

onnx2tf moves rank 3 to 5 inputs to channels-last unless told to keep them: those are named in its documented
`keep_ncw_or_nchw_or_ncdhw_input_names`, so the model is fed the upstream's inputs as they are; other ranks it never
moves. Outputs it leaves channels-last are moved back before judging (`channels_first`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fuzzer.converters.base import TORCH_HARNESS, UPSTREAM_HARNESS, Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import graph_inputs
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.tf2onnx_exporter import import_quietly, quiet_availability, quiet_tensorflow, source_arrays
from fuzzer.converters.upstream import UpstreamChoices, UpstreamOptions, export_upstream
from fuzzer.support.quiet import library_output
from oracles.verdict import Stage

TARGETS = ("keras", "tflite")


@dataclass(frozen=True)
class Onnx2TfOptions(UpstreamOptions):
    """Which of onnx2tf's outputs runs (its Keras model in TensorFlow, or its float32 .tflite in LiteRT), and
    whether onnx2tf first simplifies the model with onnxsim (onnx2tf's own default: on)."""

    choices = UpstreamChoices(target=TARGETS)
    target: str = "keras"
    # Off here, so a campaign draws it on for a quarter of its tests: onnx2tf runs the onnxsim command three times
    # in fresh processes per conversion, which costs more than every other step of the test together.
    onnxsim: bool = False


class Onnx2Tf(Converter[Onnx2TfOptions]):
    name = "onnx2tf"
    display_name = "onnx2tf"
    project = "onnx2tf"
    distribution = "onnx2tf"
    tracker = "https://github.com/PINTO0309/onnx2tf/issues"
    role = Role.IMPORTER
    framework = "onnx"
    runtime = "tensorflow"
    libraries = ("onnx2tf", "tensorflow", "ai_edge_litert", "onnxruntime")
    distributions = ("onnx", "onnxruntime", "onnx2tf", "tensorflow", "tf-keras", "ai-edge-litert")
    options_type = Onnx2TfOptions
    # The .tflite needs TensorFlow's own kernels (the Flex delegate), which LiteRT's interpreter does not link.
    # Its own "not yet" (it logs "... currently supports only ... Pull requests are welcome." and exits).
    # For inputs that all look like NHWC images it downloads sample images from GitHub for its check inference: with
    # no network, such a graph cannot be tested here (a user online does not see that failure).
    # It imports the module onnx2tf.ops.<op type> for each node (importlib): one missing is an ONNX operator it has no
    # converter for (BitwiseOr, GroupNormalization, Loop). TensorFlow's CPU kernels refuse some of what onnx2tf
    # emits faithfully ("Current CPU implementations do not yet support dilation rates larger than 1"), and LiteRT
    # has no builtin for some TensorFlow ops ("'tf.IsInf' op is neither a custom op nor a flex op").
    unsupported_messages = (r"Select TensorFlow op\(s\), included in the given model, is\(are\) not supported",
                            r"currently supports only", r"Pull requests are welcome",
                            r"calibration_image_sample_data_\d+x128x128x3", r"No module named 'onnx2tf\.ops\.\w+'",
                            r"Current CPU implementations do not yet support",
                            r"op is neither a custom op nor a flex op")
    source_harness = (*TORCH_HARNESS, "onnx2tf_run")  # a case with no upstream.onnx (its worker died)
    upstream_harness = (*UPSTREAM_HARNESS, "onnx2tf_run")
    repro_conversion = "onnx2tf_on_export"
    repro_upstream_conversion = "convert_with_onnx2tf"

    def availability(self) -> tuple[bool, str]:
        return quiet_availability(self)

    def snippet(self, options: Onnx2TfOptions) -> Snippet:
        imports = ("import onnx2tf", *(("from ai_edge_litert.interpreter import Interpreter",)
                                        if options.target == "tflite" else ()))
        return Snippet(imports, (f"open({NO_REPLACEMENTS!r}, 'w').write({NO_REPLACEMENTS_TEXT!r})",
                                 convert_line(options)), runs=run_lines(options))

    def component(self, site: FaultSite) -> Component:
        where = "its TFLite model (LiteRT)" if site.options.get("target") == "tflite" else "its Keras model"
        return self.own_component(f"onnx2tf: the conversion {site.named()}, run as {where}")

    def avoid_settings(self, options: Onnx2TfOptions, hints: Hints) -> tuple[Setting, ...]:
        """onnx2tf's own onnxsim pass off, then the other of its outputs."""
        changes: list[tuple[str, dict[str, Any]]] = []
        if options.onnxsim:
            changes.append(("onnx2tf without its onnxsim pass (not_use_onnxsim=True)", {"onnxsim": False}))
        other = "keras" if options.target == "tflite" else "tflite"
        changes.append((f"onnx2tf's {other} model", {"target": other}))
        out = []
        for what, changed in changes:
            new = Onnx2TfOptions(**{**options.to_json(), **changed})
            out.append(Setting(what, self.name, new.to_json(), convert_line(new)))
        return tuple(out)

    def trait_setting(self, options: Onnx2TfOptions) -> str:
        return options.target

    def convert_impl(self, source: Source, options: Onnx2TfOptions) -> TargetRun:
        quiet_tensorflow()
        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps)
        arrays = model_inputs(graph_inputs(up.model), source)
        with tempfile.TemporaryDirectory(prefix="convsmith-onnx2tf-") as folder:
            path = os.path.join(folder, "model.onnx")
            with open(path, "wb") as handle:
                handle.write(up.data)
            with steps.at(Stage.NODE_CONVERSION, "convert"):
                keras = convert(path, folder, channels_first_inputs(up.model), options)
            with steps.at(Stage.RUNTIME_EXECUTION, "runtime"):
                if options.target == "tflite":
                    results = run_tflite(os.path.join(folder, "model_float32.tflite"), arrays, up.model)
                else:
                    results = run_keras(keras, arrays)
        pairs = [ir_array(as_onnx_model(r, b)) for r, b in zip(results, up.outputs, strict=False)]
        return TargetRun(tuple(a for a, _ in pairs), tuple(d for _, d in pairs), dict(steps.timings),
                         baseline=up.outputs, baseline_model=up.data, baseline_dtypes=up.output_dtypes)


def model_inputs(names: Sequence[str], source: Source) -> dict[str, np.ndarray]:
    """The source's inputs under the upstream model's input names: by IR name (an exporter may drop an input no
    output reads), else in order."""
    by_name = dict(zip(source.input_names, source_arrays(source), strict=True))
    if all(n in by_name for n in names):
        return {n: by_name[n] for n in names}
    return dict(zip(names, by_name.values(), strict=True))


# A replacement file that replaces nothing converts exactly as none does, but it stops onnx2tf from searching for a
# replacement after a failed conversion: that search only suggests a file and then raises the same error, and it can
# take far longer than the conversion it follows (docs/converters.md).
NO_REPLACEMENTS = "no_replacements.json"
NO_REPLACEMENTS_TEXT = '{"operations": []}'
CHANNEL_RANKS = (3, 4, 5)  # NCW, NCHW, NCDHW: the ranks onnx2tf moves to channels-last


def channels_first_inputs(model: onnx.ModelProto) -> list[str]:
    """The data inputs onnx2tf would move to channels-last (rank 3 to 5): kept as they are by naming them in
    `keep_ncw_or_nchw_or_ncdhw_input_names`, which onnx2tf rejects for any other rank."""
    constants = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input
            if i.name not in constants and len(i.type.tensor_type.shape.dim) in CHANNEL_RANKS]


def convert(path: str, folder: str, channels_first: Sequence[str], options: Onnx2TfOptions) -> Any:
    """onnx2tf's own call, as convert_line writes it, with `channels_first` the inputs kept NCW/NCHW/NCDHW: the Keras
    model (for the tflite target, the saved model and the .tflite files go to `folder`; the Keras target saves
    nothing, as the TFLite model is the other target's test)."""
    onnx2tf, tf_keras = import_quietly("onnx2tf"), import_quietly("tf_keras")
    tf_keras.backend.clear_session()  # onnx2tf builds into Keras' global graph: each conversion starts empty
    replacements = os.path.join(folder, NO_REPLACEMENTS)
    with open(replacements, "w") as handle:
        handle.write(NO_REPLACEMENTS_TEXT)
    code: object = None
    # onnx2tf prints its saved model's signature even when non_verbose
    with library_output() as printed, own_scripts_on_path():
        try:
            return onnx2tf.convert(input_onnx_file_path=path, output_folder_path=folder, non_verbose=True,
                                   keep_ncw_or_nchw_or_ncdhw_input_names=list(channels_first),
                                   not_use_onnxsim=not options.onnxsim,
                                   copy_onnx_input_output_names_to_tflite=options.target == "tflite",
                                   disable_model_save=options.target == "keras", param_replacement_file=replacements)
        except SystemExit as exc:  # onnx2tf logs why it cannot convert, then exits: a failure, not a dead process
            code = exc.code
    raise Onnx2TfExit(exit_reason(printed.text, code))


@contextmanager
def own_scripts_on_path() -> Iterator[None]:
    """PATH led by this interpreter's scripts folder while onnx2tf runs: it runs the `onnxsim` command it finds on
    PATH, and where there is none it skips its onnxsim pass without a word (even though onnxsim=True)."""
    before = os.environ.get("PATH")
    os.environ["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), before) if p)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PATH"]
        else:
            os.environ["PATH"] = before


class Onnx2TfExit(RuntimeError):
    """onnx2tf called sys.exit on a model it could not convert; the message is the reason it logged."""


# onnx2tf's advice after any failure, which names no reason of its own.
ADVICE = ("The trace log is below", "input_onnx_file_path:", "Read this and deal with it", "Alternatively, if",
          "If the input OP", "Also, for models")


def exit_reason(printed: str, code: object) -> str:
    """The reason onnx2tf logged before exiting, with the ONNX node it names."""
    logged = [re.sub(r"\x1b\[[0-9;]*m", "", line).split("ERROR:", 1)[1].strip()
              for line in printed.splitlines() if "ERROR:" in line]
    reasons = [line for line in logged if line and not line.startswith(ADVICE)]
    node = next((line for line in reasons if line.startswith("onnx_op_name:")), "")
    reason = next((line for line in reasons if not line.startswith("onnx_op_name:")),
                  f"onnx2tf exited with status {code}")
    return f"{reason} ({node})" if node else reason


def run_keras(model: Any, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The Keras model on the inputs (by name where its inputs keep the ONNX names, else in order)."""
    names = [t.name.split(":")[0] for t in model.inputs]
    values = [arrays[n] for n in names] if all(n in arrays for n in names) else list(arrays.values())
    result = model(values if len(values) > 1 else values[0])
    return [y.numpy() for y in (result if isinstance(result, (tuple, list)) else [result])]


def run_tflite(path: str, arrays: dict[str, np.ndarray], model: onnx.ModelProto) -> list[np.ndarray]:
    """The float32 .tflite in LiteRT's interpreter, its tensors found by the ONNX names onnx2tf copied onto them."""
    interpreter = import_quietly("ai_edge_litert.interpreter").Interpreter(model_path=path)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], as_tflite_input(arrays[detail["name"]], detail["dtype"],
                                                                tuple(detail["shape"])))
    interpreter.invoke()
    found = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}
    names = [o.name for o in model.graph.output]
    if all(n in found for n in names):
        return [found[n] for n in names]
    # Unnamed, they are Identity, Identity_1, ... in the ONNX model's output order.
    return [found[n] for n in sorted(found, key=unnamed_output_order)]


def unnamed_output_order(name: str) -> int:
    """Identity, Identity_1, ...: the ONNX model's order of the outputs onnx2tf left unnamed in the .tflite; any
    other name (an input passed through, 't0_orig') keeps its place."""
    suffix = name.rpartition("_")[2]
    return int(suffix) if "_" in name and suffix.isdigit() else 0


def as_tflite_input(array: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """An input as the .tflite model declares it, as a user reading its input details would feed it: a float16 input
    that onnx2tf made float32 (its float16 models are converted to float32, onnx2tf pull request 427) widened,
    exactly, and a scalar reshaped to the shape declared (onnx2tf makes a rank-0 input a Keras input of shape
    (batch,), declared [1])."""
    array = array.astype(np.float32) if array.dtype == np.float16 and dtype == np.float32 else array
    return array.reshape(shape) if array.ndim == 0 else array


def as_onnx_model(array: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """An output as the ONNX model gives it, where onnx2tf changes it by design: channels-last moved back, and a
    float16 output, which onnx2tf computes in float32 (its float16 models are converted to float32, onnx2tf pull
    request 427), narrowed back to float16 (its values are still judged)."""
    array = channels_first(array, baseline.shape)
    return array.astype(np.float16) if baseline.dtype == np.float16 and array.dtype == np.float32 else array


def channels_first(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """An output onnx2tf left channels-last (its documented NHWC layout) moved back to the ONNX model's layout; any
    other output as it is. The channel axis is 1 from rank 3 up (NCW, NCHW, NCDHW) and 0 at rank 2 (a (C, W) that
    is an NCW with its batch squeezed away, which onnx2tf gives as (W, C))."""
    if len(shape) < 2:
        return array
    axis = 1 if len(shape) >= 3 else 0
    last = (*shape[:axis], *shape[axis + 1:], shape[axis])
    return np.moveaxis(array, -1, axis) if array.shape != tuple(shape) and array.shape == last else array


def ir_array(array: np.ndarray) -> tuple[np.ndarray, str]:
    """An output as the oracle takes it (bfloat16 in float32 storage) and its IR dtype name."""
    from generators.tf_model import oracle_array

    return oracle_array(array), str(array.dtype)


def convert_line(options: Onnx2TfOptions) -> str:
    """The user's onnx2tf call on model.onnx, its rank 3 to 5 inputs (`nchw_inputs`) kept channels-first: its Keras
    model alone, or with the .tflite files written to out/."""
    extra = "" if options.onnxsim else ", not_use_onnxsim=True"
    if options.target == "tflite":
        extra += ", copy_onnx_input_output_names_to_tflite=True"
    else:
        extra += ", disable_model_save=True"
    return ('keras_model = onnx2tf.convert(input_onnx_file_path="model.onnx", output_folder_path="out", '
            f"non_verbose=True, keep_ncw_or_nchw_or_ncdhw_input_names=nchw_inputs{extra}, "
            f'param_replacement_file="{NO_REPLACEMENTS}")')


def run_lines(options: Onnx2TfOptions) -> tuple[str, ...]:
    """The user's run of what convert_line made on `inputs` (by ONNX name), as run_keras and run_tflite run it."""
    if options.target == "keras":
        return ("got = keras_model(list(inputs.values()) if len(inputs) > 1 else next(iter(inputs.values())))",
                "got = [np.asarray(y) for y in (got if isinstance(got, (list, tuple)) else [got])]")
    return ('interpreter = Interpreter(model_path="out/model_float32.tflite")',
            "interpreter.allocate_tensors()",
            "for d in interpreter.get_input_details():",
            '    x = inputs[d["name"]]',
            "    x = x.astype(np.float32) if x.dtype == np.float16 else x  # onnx2tf makes float16 models float32",
            '    interpreter.set_tensor(d["index"], x.reshape(d["shape"]) if x.ndim == 0 else x)  # as declared',
            "interpreter.invoke()",
            'found = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}',
            "names = [o.name for o in model.graph.output]",
            "if not all(n in found for n in names):  # unnamed: Identity, Identity_1, ... in the model's order",
            "    names = sorted(found, key=lambda n: int(n.split('_')[-1]) if n.split('_')[-1].isdigit() else 0)",
            "got = [found[n] for n in names]")
