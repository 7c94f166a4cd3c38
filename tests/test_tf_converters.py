"""The TensorFlow family end to end: tf2onnx judged against TensorFlow eager (its float64 twin the reference), a
TensorFlow model that fails filed as the source's, onnx2tf's layout, and a tf2onnx case's repro.py run alone with no
torch. The fault is planted through a registry entry (PlantedSinAsCos), never left to an upstream bug."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import hand_graphs
import numpy as np
import onnx
import pytest

from fuzzer.cases.case import case_from_result, case_log, collect_versions
from fuzzer.cases.folder import write_case
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.capabilities import expresses
from fuzzer.converters.onnx2tf_importer import as_onnx_model, channels_first
from fuzzer.converters.runtime import graph_inputs
from fuzzer.converters.tf2onnx_exporter import Tf2Onnx, Tf2OnnxOptions
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from generators.registry import REGISTRY
from oracles.verdict import Stage, Symptom

FAST = CheckOptions(rerun=False, locate=False, culprit=False)


class PlantedSinAsCos(Tf2Onnx):
    """tf2onnx with a planted fault: the ONNX model it writes computes every Sin as Cos."""

    name = "planted-tf2onnx-sin-as-cos"

    def export_model(self, model: Any, graph: Graph, options: Tf2OnnxOptions) -> onnx.ModelProto:
        proto = super().export_model(model, graph, options)
        for node in proto.graph.node:
            if node.op_type == "Sin":
                node.op_type = "Cos"
        return proto


def one_op(op: str, dtype: DType = DType.FLOAT32) -> Graph:
    b = GraphBuilder()
    x = b.input((3, 5), dtype)
    return b.build((b.op(op, (x,), (3, 5), dtype),))


def _available() -> None:
    ok, reason = CONVERTERS["tf2onnx"].availability()
    if not ok:
        pytest.skip(reason)


@pytest.mark.slow
def test_a_planted_tf2onnx_fault_is_a_wrong_value_measured_from_tensorflows_float64_twin() -> None:
    _available()
    result = check_prepared(prepare(one_op("sin"), 3, {}, 1.0), PlantedSinAsCos(), {"opset": 17}, FAST)
    verdict = result.verdict
    assert (verdict.symptom, verdict.stage, verdict.converter) == (
        Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, "planted-tf2onnx-sin-as-cos")
    assert verdict.diverging_op == "sin"
    assert result.target is not None and result.target.reference is not None
    assert result.target.reference[0].dtype == np.float64


@pytest.mark.slow
def test_the_real_tf2onnx_passes_the_same_graph_from_a_function_and_from_keras() -> None:
    _available()
    prepared = prepare(one_op("sin"), 3, {}, 1.0)
    for options in ({"source": "function"}, {"source": "keras", "optimize": False}):
        assert check_prepared(prepared, CONVERTERS["tf2onnx"], options, FAST).verdict.symptom is Symptom.PASS


@pytest.mark.slow
def test_a_graph_with_weights_exports_with_no_input_beyond_the_graphs() -> None:
    """The weights are variables, which tf2onnx freezes into initializers (a captured tf.constant would become one
    more graph input that nothing feeds)."""
    _available()
    b = GraphBuilder()
    x, w = b.input((2, 3, 4)), b.weight((3,))
    prepared = prepare(b.build((b.op("prelu", (x, w), (2, 3, 4)),)), 3, {}, 1.0)
    for options in ({"source": "function"}, {"source": "keras"}):
        result = check_prepared(prepared, CONVERTERS["tf2onnx"], options, FAST)
        assert result.verdict.symptom is Symptom.PASS, (options, result.verdict)
        assert result.target is not None and result.target.model is not None
        assert graph_inputs(onnx.load_from_string(result.target.model)) == ["in0"]


def test_optimizer_off_is_a_keras_option_only() -> None:
    with pytest.raises(ValueError, match="from_function takes no optimizers"):
        Tf2OnnxOptions(source="function", optimize=False)
    assert all(Tf2OnnxOptions.draw(seed).optimize or Tf2OnnxOptions.draw(seed).source == "keras"
               for seed in range(50))


def test_tf2onnx_expresses_only_operators_with_a_tensorflow_source() -> None:
    converter = CONVERTERS["tf2onnx"]
    assert expresses(converter, one_op("sin")) and converter.expressible(REGISTRY["sin"])
    assert not converter.expressible(REGISTRY["conv_transpose3d"])  # no exact TensorFlow twin of torch's


def test_onnx2tf_channels_last_outputs_are_moved_back_and_nothing_else() -> None:
    nchw = np.arange(24).reshape(1, 2, 3, 4)
    assert channels_first(np.moveaxis(nchw, 1, -1), (1, 2, 3, 4)).tolist() == nchw.tolist()
    assert channels_first(nchw, (1, 2, 3, 4)) is nchw
    other = np.zeros((4, 3, 2))
    assert channels_first(other, (3, 4, 2)) is other


def test_onnx2tf_float16_outputs_computed_in_float32_are_narrowed_back_by_design() -> None:
    wide = np.array([1.0, 2.5], dtype=np.float32)
    assert as_onnx_model(wide, np.zeros(2, np.float16)).dtype == np.float16
    assert as_onnx_model(wide, np.zeros(2, np.float32)) is wide


@pytest.mark.slow
def test_a_tf2onnx_cases_repro_runs_alone_without_torch(tmp_path: Path) -> None:
    """The case written from the planted converter's finding; its repro.py calls the real tf2onnx, which computes
    Sin right: the script runs in an empty folder, imports no torch, and says the bug does not show (exit 0)."""
    _available()
    graph = one_op("sin")
    planted = PlantedSinAsCos()
    result = check_prepared(prepare(graph, 3, {}, 1.0), planted, {"opset": 17}, FAST)
    case = case_from_result(result, graph, 3, planted.name, collect_versions(()), log=case_log(result))
    folder = write_case(tmp_path / "cases", case, converter=planted)
    script = (folder / "repro.py").read_text()
    assert "import torch" not in script and "tf2onnx.convert.from_function" in script
    alone = tmp_path / "alone"
    subprocess.run(["cp", "-r", str(folder), str(alone)], check=True)
    run = subprocess.run([sys.executable, "repro.py"], cwd=alone, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "TensorFlow eager matches the saved expected outputs" in run.stdout
    assert "bug does not show" in run.stdout


def test_onnx2tf_feeds_the_inputs_that_take_data_not_initializers_listed_as_inputs() -> None:
    """tf2onnx lists its constants among the graph's inputs too (IR 3 style); they are not fed."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "g", [x, c], [y],
                              [numpy_helper.from_array(np.ones(2, np.float32), "c")])
    assert graph_inputs(helper.make_model(graph)) == ["x"]


def test_onnx2tf_exiting_on_a_model_is_a_failure_with_its_logged_reason_and_a_not_yet_is_unsupported() -> None:
    """onnx2tf logs why it cannot convert and calls sys.exit: that is a conversion failure with the reason it logged
    (not a dead worker), and its own "currently supports only ... Pull requests are welcome" is unsupported."""
    from fuzzer.converters.onnx2tf_importer import exit_reason
    from oracles.taxonomy import Failure, classify

    printed = ("\x1b[31mERROR:\x1b[0m ScatterElements currently supports only reduction=['none']. Pull requests are "
               "welcome. \n\x1b[31mERROR:\x1b[0m The trace log is below.\nTraceback ...\n"
               "\x1b[31mERROR:\x1b[0m input_onnx_file_path: /tmp/x/model.onnx\n"
               "\x1b[31mERROR:\x1b[0m onnx_op_name: /ScatterElements\n"
               "\x1b[31mERROR:\x1b[0m Read this and deal with it. https://github.com/PINTO0309/onnx2tf\n")
    reason = exit_reason(printed, 1)
    assert reason == ("ScatterElements currently supports only reduction=['none']. Pull requests are welcome. "
                      "(onnx_op_name: /ScatterElements)")
    assert exit_reason("", 1) == "onnx2tf exited with status 1"
    failure = Failure(Stage.NODE_CONVERSION, "fuzzer.converters.onnx2tf_importer.Onnx2TfExit", reason, "")
    assert classify(failure, CONVERTERS["onnx2tf"].unsupported_messages) is Symptom.UNSUPPORTED
    assert classify(failure) is Symptom.CRASH
    offline = Failure(Stage.NODE_CONVERSION, "requests.exceptions.ConnectionError",
                      "HTTPSConnectionPool(host='github.com', port=443): Max retries exceeded with url: /PINTO0309/"
                      "onnx2tf/releases/download/1.20.4/calibration_image_sample_data_20x128x128x3_float32.npy", "")
    assert classify(offline, CONVERTERS["onnx2tf"].unsupported_messages) is Symptom.UNSUPPORTED
    no_converter = Failure(Stage.NODE_CONVERSION, "builtins.ModuleNotFoundError",
                           "No module named 'onnx2tf.ops.BitwiseOr'", "")
    assert classify(no_converter, CONVERTERS["onnx2tf"].unsupported_messages) is Symptom.UNSUPPORTED
    assert classify(no_converter) is Symptom.CRASH
    its_own = Failure(Stage.NODE_CONVERSION, "builtins.ModuleNotFoundError", "No module named 'tensorflow_hub'", "")
    assert classify(its_own, CONVERTERS["onnx2tf"].unsupported_messages) is Symptom.CRASH


@pytest.mark.slow
def test_onnx2tf_tflite_float16_inputs_made_float32_by_design_are_widened(tmp_path: Path) -> None:
    """onnx2tf makes a float16 model float32 (its pull request 427), inputs included: the .tflite model declares
    them float32 and is fed them widened, as a user reading its input details would, in the check and in repro.py."""
    ok, reason = CONVERTERS["onnx2tf"].availability()
    if not ok:
        pytest.skip(reason)
    b = GraphBuilder()
    x = b.input((2, 3), DType.FLOAT16)
    graph = b.build((b.op("tanh", (x,), (2, 3), DType.FLOAT16),))
    options = {"opset": 18, "target": "tflite", "upstream": "torch-onnx-dynamo", "onnxsim": True}
    onnx2tf = CONVERTERS["onnx2tf"]
    result = check_prepared(prepare(graph, 3, {}, 1.0), onnx2tf, options, FAST)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    case = case_from_result(result, graph, 3, onnx2tf.name, collect_versions(()), log=case_log(result))
    folder = write_case(tmp_path / "cases", case, converter=onnx2tf)
    run = subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "bug does not show" in run.stdout, run.stdout + run.stderr


@pytest.mark.slow
def test_onnx2tf_keras_target_saves_nothing_and_its_repro_line_says_so(tmp_path: Path) -> None:
    """The Keras target's test runs the Keras model alone: onnx2tf is told not to save (no saved model, no .tflite,
    which the tflite target tests), and the user's line in a report carries the same flag."""
    from fuzzer.converters.onnx2tf_importer import Onnx2TfOptions, channels_first_inputs, convert, convert_line

    ok, reason = CONVERTERS["onnx2tf"].availability()
    if not ok:
        pytest.skip(reason)
    path = tmp_path / "model.onnx"
    model = hand_graphs.one_node_model("Tanh", onnx.TensorProto.FLOAT, [2, 3], 18)
    onnx.save(model, path)
    keras = convert(str(path), str(tmp_path), channels_first_inputs(model), Onnx2TfOptions(target="keras"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "no_replacements.json"]
    value = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    assert np.allclose(np.asarray(keras(value)), np.tanh(value), atol=1e-6)
    assert "disable_model_save=True" in convert_line(Onnx2TfOptions(target="keras"))
    assert "disable_model_save" not in convert_line(Onnx2TfOptions(target="tflite"))


@pytest.mark.slow
def test_onnx2tf_given_a_replacement_file_that_replaces_nothing_does_not_search_for_one_after_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """onnx2tf searches for a parameter replacement after a failed conversion unless given a file; the search only
    suggests one and re-raises the same error, so the check gives it a file that replaces nothing."""
    import onnx2tf.onnx2tf as library

    from fuzzer.converters.onnx2tf_importer import Onnx2TfOptions, convert

    ok, reason = CONVERTERS["onnx2tf"].availability()
    if not ok:
        pytest.skip(reason)
    searches: list[object] = []
    monkeypatch.setattr(library, "generate_auto_replacement_json", lambda **kw: searches.append(kw) or {})
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 3])
    scale = onnx.helper.make_tensor("scale", onnx.TensorProto.FLOAT, [2], [1.0, 1.0])
    bias = onnx.helper.make_tensor("bias", onnx.TensorProto.FLOAT, [2], [0.0, 0.0])
    node = onnx.helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=2)
    graph = onnx.helper.make_graph([node], "g", [x], [y], [scale, bias])
    path = tmp_path / "model.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)]), path)
    with pytest.raises(ModuleNotFoundError, match="GroupNormalization"):
        convert(str(path), str(tmp_path), ["x"], Onnx2TfOptions(target="keras", onnxsim=False))
    assert searches == []
    with pytest.raises(ModuleNotFoundError):  # without the file, the same call searches
        library.convert(input_onnx_file_path=str(path), output_folder_path=str(tmp_path), non_verbose=True,
                        not_use_onnxsim=True, disable_model_save=True)
    assert searches
