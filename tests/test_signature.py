"""Tests for oracles.signature: crashes differing only in incidental details share one signature."""

from __future__ import annotations

import re

import pytest

from oracles.signature import (
    MESSAGE_CAP,
    crash_signature,
    normalise_frame,
    normalise_message,
    wrong_value_signature,
)
from oracles.verdict import Stage, Symptom

ORT = "[ONNXRuntimeError] : 1 : FAIL : Node ({node}) Op (Conv) [ShapeInferenceError] input {shape} rank {n} mismatch"

# Pairs of messages that must share a signature: only names, shapes, numbers, paths or addresses differ.
SAME = [
    ("tensor-names", ORT.format(node="/Conv_3", shape="[1, 3, 224, 224]", n=4),
     ORT.format(node="/layer1/conv/Conv_17", shape="[1, 3, 224, 224]", n=4)),
    ("shapes", ORT.format(node="/Conv_3", shape="[1, 3, 224, 224]", n=4),
     ORT.format(node="/Conv_3", shape="(2,3)", n=2)),
    ("quoted-names", "Tensor 'onnx::Add_12' has no type", "Tensor 'onnx::Mul_7' has no type"),
    ("generated-names", "v12_out is undefined", "v3_out is undefined"),
    ("underscore-numbers", "Input val_13 of node input_0 missing", "Input val_2 of node input_77 missing"),
    ("numbers", "opset 17 expects 3 inputs, got 2.5e-3", "opset 18 expects 4 inputs, got -1"),
    ("hex", "segfault at 0x7f3a2b1c0d00 in kernel", "segfault at 0x55d1 in kernel"),
    ("paths", 'File "/usr/lib/python3.12/site.py", line 12, in f: bad', 'File "/opt/x/y.py", line 99, in f: bad'),
    ("file-lines", "error at /src/onnx/checker.cc:1234: invalid", "error at /build/onnx/checker.cc:99: invalid"),
    ("torch-size", "got torch.Size([2, 3]) and 2x3x4", "got torch.Size([5]) and 7x1"),
    ("whitespace", "a   b\tc", "a b c"),
    ("later-lines", "Shape mismatch\n  at node 3\n  at v1", "Shape mismatch\n  at node 9"),
    ("ort-node-names", "running ScatterElements node. Name:'node_scatter_add' Status Message: Indices differ",
     "running ScatterElements node. Name:'/ScatterElements' Status Message: Indices differ"),
    ("torchscript-values", "[Caused by the value 'input.4 defined in (%input.4 : Tensor = onnx::Abs(%out), scope",
     "[Caused by the value 'a defined in (%a : Tensor = onnx::Abs(%out.3), scope"),
    ("numpy-arrays", "Output tensors of a Functional model must be the output of a Layer. Found: [[1.5 2.25]",
     "Output tensors of a Functional model must be the output of a Layer. Found: [ 0.5 1. ... 7. ]"),
    ("long-decimals", "Found: 0.044714998453855515 in output", "Found: 1.0 in output"),
    ("keras-layer-counters", 'Exception encountered when calling layer "tf.transpose_1" (type TFOpLambda).\n\n'
     "Dimension must be 4 but is 3 for '{{node tf.transpose_1/transpose}}'",
     'Exception encountered when calling layer "tf.transpose" (type TFOpLambda).\n\n'
     "Dimension must be 5 but is 2 for '{{node tf.transpose/transpose}}'"),
    ("inference-node-names", "(op_type:Mul, node name: node_mul_reduce): B has inconsistent type",
     "(op_type:Mul, node name: /Mul_1): B has inconsistent type"),
]

# Pairs that must not share a signature: the essence differs.
DIFFERENT = [
    ("messages", "Shape mismatch in Conv", "Type mismatch in Conv"),
    ("op-types", "No Op registered for 'Gelu'", "No Op registered for 'Erf'"),
    ("aten-ops", "Exporting 'aten::max_pool2d' is not supported", "Exporting 'aten::avg_pool2d' is not supported"),
    ("dtypes", "Cast to float16 failed", "Cast to float32 failed"),
    ("keras-layer-reasons", 'Exception encountered when calling layer "tf.pad" (type TFOpLambda).\n\nbad `mode`',
     'Exception encountered when calling layer "tf.pad" (type TFOpLambda).\n\nPaddings must be non-negative'),
    ("keras-layer-ops", 'Exception encountered when calling layer "tf.math.pow" (type TFOpLambda).\n\nbad type',
     'Exception encountered when calling layer "tf.math.greater" (type TFOpLambda).\n\nbad type'),
    ("torchscript-node-kinds", "the value 'x defined in (%x : Tensor = onnx::Abs(%y)",
     "the value 'x defined in (%x : Tensor = onnx::Log(%y)"),
]


@pytest.mark.parametrize("first, second", [c[1:] for c in SAME], ids=[c[0] for c in SAME])
def test_incidental_details_share_a_signature(first: str, second: str) -> None:
    assert normalise_message(first) == normalise_message(second)
    assert crash_signature("ort", Stage.RUNTIME_LOAD, "Fail", first) == crash_signature(
        "ort", Stage.RUNTIME_LOAD, "Fail", second
    )


@pytest.mark.parametrize("first, second", [c[1:] for c in DIFFERENT], ids=[c[0] for c in DIFFERENT])
def test_different_messages_differ(first: str, second: str) -> None:
    assert crash_signature("ort", Stage.RUNTIME_LOAD, "Fail", first) != crash_signature(
        "ort", Stage.RUNTIME_LOAD, "Fail", second
    )


@pytest.mark.parametrize(
    "args",
    [
        ("onnxsim", Stage.RUNTIME_LOAD, "Fail", "boom", None),
        ("ort", Stage.GRAPH_OPTIMIZATION, "Fail", "boom", None),
        ("ort", Stage.RUNTIME_LOAD, "RuntimeError", "boom", None),
        ("ort", Stage.RUNTIME_LOAD, "mod.Fail", "boom", None),
        ("ort", Stage.RUNTIME_LOAD, "Fail", "boom", "checker.py in check_model"),
    ],
)
def test_each_identity_part_changes_the_signature(args: tuple) -> None:
    assert crash_signature(*args) != crash_signature("ort", Stage.RUNTIME_LOAD, "Fail", "boom", None)


def test_signature_is_readable_and_filename_safe() -> None:
    sig = crash_signature("torch.onnx(dynamo)", Stage.CAPTURE, "torch._dynamo.exc.Unsupported", "x")
    assert re.fullmatch(r"crash-torch\.onnx-dynamo-capture-Unsupported-[0-9a-f]{12}", sig)
    assert crash_signature("c", "capture", "E", "x") == crash_signature("c", Stage.CAPTURE, "E", "x")


def test_normalised_message_examples() -> None:
    assert normalise_message(ORT.format(node="/Conv_3", shape="[1, 3, 224, 224]", n=4)) == (
        "[ONNXRuntimeError] : <n> : FAIL : Node (<name>) Op (Conv) [ShapeInferenceError] "
        "input <shape> rank <n> mismatch"
    )
    assert normalise_message("Unsupported:\n  aten::gelu with int64_t") == "Unsupported: aten::gelu with int64_t"
    assert normalise_message("got [1 2 3] and [4], [2, 3]") == "got <array> and <shape>, <shape>"
    assert normalise_message("") == ""
    assert len(normalise_message("word " * 200)) == MESSAGE_CAP


def test_frame_drops_directories_and_lines() -> None:
    assert normalise_frame("/site-packages/onnx/checker.py:123 in check_model") == "checker.py in check_model"
    assert normalise_frame('File "C:\\x\\y.py", line 7, in f') == normalise_frame('File "/a/y.py", line 9, in f')
    assert normalise_frame(None) == ""


def test_wrong_value_signature() -> None:
    sig = wrong_value_signature("ort", Stage.RUNTIME_EXECUTION, Symptom.WRONG_VALUES, "gelu", "float16")
    assert re.fullmatch(r"wrong_values-ort-runtime_execution-gelu-float16-[0-9a-f]{12}", sig)
    assert sig != wrong_value_signature("ort", Stage.RUNTIME_EXECUTION, Symptom.WRONG_VALUES, "gelu", "float32")
    assert wrong_value_signature("ort", Stage.NONE, Symptom.WRONG_SHAPE, None, None).startswith(
        "wrong_shape-ort-none-unknown-unknown-"
    )
