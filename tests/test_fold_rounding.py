"""Rounding of folds decided: the ideal fold (float32, rounded once), and a half-type Conv+BatchNorm fold judged
against it: within FOLD_SLACK of its error it passes as rounding, farther it stays the tool's bug."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuzzer.check.fold_rounding import FOLD_BEYOND, FOLD_ROUNDING, FOLD_SLACK, fold_errors, judged_fold, within_rounding
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.ideal_fold import foldable, ideal_fold
from generators.generator import GenOptions, generate
from oracles.verdict import Stage, Symptom, Verdict


def _conv_bn(second_consumer: bool = False) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    half = {"w": rng.normal(0, 0.3, (2, 2, 1, 1)), "s": [3.0, -2.0], "bt": [0.5, 1.0], "m": [0.1, 0.0],
            "v": [1e-3, 0.5]}
    inits = [numpy_helper.from_array(np.asarray(v, np.float16), k) for k, v in half.items()]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "s", "bt", "m", "v"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 2, 2, 2])]
    if second_consumer:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT16, [1, 2, 2, 2]))
    graph = helper.make_graph(nodes, "cb", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 2, 2, 2])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_ideal_fold_folds_in_float32_and_rounds_once() -> None:
    model = _conv_bn()
    folded = ideal_fold(model)
    assert folded is not None and [n.op_type for n in folded.graph.node] == ["Conv"]
    w = numpy_helper.to_array(next(t for t in folded.graph.initializer if t.name == "ideal_fold_w0"))
    scale = np.float32(np.float16(3.0)) / np.sqrt(np.float32(np.float16(1e-3)) + np.float32(1e-5))
    weight = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "w")).astype(np.float32)
    assert w.dtype == np.float16 and w[0, 0, 0, 0] == np.float16(weight[0, 0, 0, 0] * scale)
    assert ideal_fold(_conv_bn(second_consumer=True)) is None and foldable(_conv_bn(True)) == []


def test_errors_within_the_slack_are_rounding() -> None:
    assert fold_errors([np.array([1.0, np.inf])], [np.array([1.5, 2.0])]) == (0.5,)
    assert fold_errors([np.zeros(2)], [np.zeros(3)]) == (float("inf"),)
    assert within_rounding((FOLD_SLACK * 0.1,), (0.1,)) and not within_rounding((FOLD_SLACK * 0.1 + 1e-6,), (0.1,))


def _onnxslim_fold() -> tuple[object, object]:
    graph = generate(5, GenOptions(nodes=1, include_ops=("pattern_conv_bn",), dtypes=("float16",)))
    result = check_prepared(prepare(graph, 5, {}, 1.0), CONVERTERS["onnxslim"], {"upstream": "onnx-native"})
    assert result.target is not None and result.expected is not None
    received = onnx.load_from_string(result.target.baseline_model)
    assert foldable(received) and "FusionConvBN" in result.target.rewrites
    return result.expected, result.target


def test_a_real_half_fold_judged_against_the_ideal_one() -> None:
    expected, run = _onnxslim_fold()
    wrong = Verdict(Symptom.WRONG_VALUES, Stage.GRAPH_OPTIMIZATION, "onnxslim", signature="s")
    judged = judged_fold(wrong, expected, run)
    assert judged.symptom is Symptom.PASS and FOLD_ROUNDING in judged.labels and not judged.is_bug
    # The same fold a per mille off on every value: beyond what rounding the folded weights once costs.
    off = dataclasses.replace(run, outputs=tuple(o * np.float16(1.001) + np.float16(0.01) for o in run.outputs))
    beyond = judged_fold(wrong, expected, off)
    assert beyond.symptom is Symptom.WRONG_VALUES and FOLD_BEYOND in beyond.labels and beyond.is_bug
    crash = Verdict(Symptom.CRASH, Stage.GRAPH_OPTIMIZATION, "onnxslim")
    assert judged_fold(crash, expected, run) is crash
