"""onnx2tf called as its documentation tells users: rank 3 to 5 inputs kept channels-first by its
`keep_ncw_or_nchw_or_ncdhw_input_names`, the outputs it leaves channels-last moved back, and its onnxsim pass run
whatever the caller's PATH. Every test runs the real onnx2tf."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuzzer.cases.case import case_from_result, case_log, collect_versions
from fuzzer.cases.folder import write_case
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.onnx2tf_importer import (
    Onnx2TfOptions,
    channels_first,
    channels_first_inputs,
    convert,
    convert_line,
    run_tflite,
)
from generators.builder import GraphBuilder
from oracles.verdict import Symptom

FAST = CheckOptions(rerun=False, locate=False, culprit=False)


def _available() -> None:
    ok, reason = CONVERTERS["onnx2tf"].availability()
    if not ok:
        pytest.skip(reason)


def pool_model() -> onnx.ModelProto:
    """An NCHW max pool beside an unbatched 1-D one on a rank-2 (C, W) input (unsqueezed, pooled, squeezed)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("Unsqueeze", ["y", "zero"], ["u"]),
             helper.make_node("MaxPool", ["u"], ["v"], kernel_shape=[2], strides=[2]),
             helper.make_node("Squeeze", ["v", "zero"], ["q"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4]),
                                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
                              [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 2, 2, 3]),
                               helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, 5])],
                              [numpy_helper.from_array(np.array([0], np.int64), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_only_rank_3_to_5_data_inputs_are_named_channels_first() -> None:
    """onnx2tf rejects its option on any other rank, and initializers listed as inputs are not fed."""
    model = pool_model()
    model.graph.input.append(helper.make_tensor_value_info("zero", TensorProto.INT64, [1]))
    assert channels_first_inputs(model) == ["x"]
    line = convert_line(Onnx2TfOptions())
    assert "keep_ncw_or_nchw_or_ncdhw_input_names=nchw_inputs" in line and "keep_shape_absolutely" not in line


def test_channels_last_outputs_move_back_at_rank_2_as_from_rank_3_up() -> None:
    nchw = np.arange(24).reshape(1, 2, 3, 4)
    assert channels_first(np.moveaxis(nchw, 1, -1), (1, 2, 3, 4)).tolist() == nchw.tolist()
    cw = np.arange(6).reshape(2, 3)
    assert channels_first(cw.T, (2, 3)).tolist() == cw.tolist()
    assert channels_first(cw, (2, 3)) is cw
    flat = np.arange(3)
    assert channels_first(flat, (3,)) is flat


@pytest.mark.slow
@pytest.mark.parametrize("target", ["keras", "tflite"])
def test_nchw_inputs_are_fed_as_they_are_and_outputs_match_onnx_runtime(tmp_path: Path, target: str) -> None:
    """The Keras model takes x as NCHW (1, 2, 3, 4) and y as it is; onnx2tf gives p as NHWC and q as (W, C), and
    both moved back equal ONNX Runtime's outputs exactly."""
    _available()
    model = pool_model()
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.random((1, 2, 3, 4), np.float32), "y": rng.random((2, 10), np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    keras = convert(str(path), str(tmp_path), channels_first_inputs(model), Onnx2TfOptions(target=target,
                                                                                              onnxsim=False))
    assert [tuple(i.shape) for i in keras.inputs] == [(1, 2, 3, 4), (2, 10)]
    if target == "tflite":
        got = run_tflite(str(tmp_path / "model_float32.tflite"), feeds, model)
    else:
        got = [np.asarray(y) for y in keras([feeds["x"], feeds["y"]])]
    assert [g.shape for g in got] == [(1, 2, 3, 2), (5, 2)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(channels_first(g, w.shape), w)


def foldable_model() -> onnx.ModelProto:
    """y = x + (a + b), a and b constants: onnxsim folds a + b, leaving one Add."""
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Add", ["x", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                              [numpy_helper.from_array(np.ones((1, 3), np.float32), "a"),
                               numpy_helper.from_array(np.ones((1, 3), np.float32), "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def no_onnxsim_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """PATH set to an empty folder, as a campaign's worker may run with no environment's scripts on it."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("onnxsim") is None
    return str(empty)


@pytest.mark.slow
@pytest.mark.parametrize(("onnxsim", "adds"), [(True, 1), (False, 2)])
def test_onnx2tf_runs_its_onnxsim_pass_as_the_option_says_whatever_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, onnxsim: bool, adds: int) -> None:
    """onnx2tf runs the onnxsim command in place on the model file it converts: the constant Add is folded with
    onnxsim=True even where PATH has no onnxsim, and kept with onnxsim=False; PATH is as it was afterwards."""
    _available()
    empty = no_onnxsim_on_path(tmp_path, monkeypatch)
    path = tmp_path / "model.onnx"
    onnx.save(foldable_model(), path)
    convert(str(path), str(tmp_path), [], Onnx2TfOptions(target="keras", onnxsim=onnxsim))
    assert [n.op_type for n in onnx.load(path).graph.node] == ["Add"] * adds
    assert os.environ["PATH"] == empty


# Runs a case's repro.py as `python repro.py` does, noting each command onnx2tf ran that returned (a spy that calls
# the real subprocess.check_output).
SPY = """import runpy, subprocess, sys
real = subprocess.check_output
def spy(args, *rest, **options):
    out = real(args, *rest, **options)
    print("command ran:", args[0], flush=True)
    return out
subprocess.check_output = spy
sys.argv = ["repro.py"]
runpy.run_path("repro.py", run_name="__main__")
"""


@pytest.mark.slow
def test_an_onnx2tf_cases_repro_runs_onnxsim_with_no_onnxsim_on_path(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The case recorded onnxsim=True, and its repro.py, run where PATH has no onnxsim, runs it too."""
    _available()
    b = GraphBuilder()
    x = b.input((2, 3))
    graph = b.build((b.op("tanh", (x,), (2, 3)),))
    options = {"opset": 18, "target": "keras", "upstream": "torch-onnx-dynamo", "onnxsim": True}
    onnx2tf = CONVERTERS["onnx2tf"]
    result = check_prepared(prepare(graph, 3, {}, 1.0), onnx2tf, options, FAST)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    case = case_from_result(result, graph, 3, onnx2tf.name, collect_versions(()), log=case_log(result))
    folder = write_case(tmp_path / "cases", case, converter=onnx2tf)
    env = dict(os.environ, PATH=no_onnxsim_on_path(tmp_path, monkeypatch))
    run = subprocess.run([sys.executable, "-c", SPY], cwd=folder, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "bug does not show" in run.stdout, run.stdout + run.stderr
    assert run.stdout.count("command ran: onnxsim") == 3  # onnx2tf runs it three times in a row


def scalar_add_model() -> onnx.ModelProto:
    """z = s + y, s a rank-0 input."""
    graph = helper.make_graph([helper.make_node("Add", ["s", "y"], ["z"])], "g",
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.slow
def test_a_scalar_input_is_fed_to_the_tflite_model_at_the_shape_it_declares(tmp_path: Path) -> None:
    """onnx2tf declares a rank-0 input [1] in its .tflite (a Keras input of shape (batch,)): fed reshaped to it,
    as its input details say, the model adds right."""
    from ai_edge_litert.interpreter import Interpreter

    _available()
    model = scalar_add_model()
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    convert(str(path), str(tmp_path), [], Onnx2TfOptions(target="tflite", onnxsim=False))
    tflite = str(tmp_path / "model_float32.tflite")
    interpreter = Interpreter(model_path=tflite)
    assert {d["name"]: d["shape"].tolist() for d in interpreter.get_input_details()} == {"s": [1], "y": [2, 3]}
    feeds = {"s": np.array(2.0, np.float32), "y": np.arange(6, dtype=np.float32).reshape(2, 3)}
    [got] = run_tflite(tflite, feeds, model)
    np.testing.assert_array_equal(got, feeds["y"] + 2.0)


def test_unnamed_tflite_outputs_are_ordered_and_a_passed_through_input_keeps_its_place() -> None:
    """onnx2tf names unnamed .tflite outputs Identity, Identity_1, ...; the dynamo exporter's input that is also an
    output ('t0_orig') made the order's int() raise, filed as onnx2tf's crash at runtime execution."""
    from fuzzer.converters.onnx2tf_importer import unnamed_output_order

    assert sorted(["Identity_2", "Identity", "Identity_1"], key=unnamed_output_order) == [
        "Identity", "Identity_1", "Identity_2"]
    assert sorted(["t0_orig", "Identity_1"], key=unnamed_output_order) == ["t0_orig", "Identity_1"]
