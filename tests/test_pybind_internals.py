"""ONNX Runtime gets pybind11 internals of its own (fuzzer/support/pybind_internals.py): torch's stay in place, ONNX
Runtime still runs models and raises its own exceptions."""

from __future__ import annotations

import builtins
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuzzer.support.pybind_internals import KEPT_PREFIX, own_pybind11_internals

ROOT = Path(__file__).resolve().parents[1]
FAKE = "__pybind11_internals_v0_convsmith_test__"


def test_a_record_made_inside_is_kept_apart_and_the_one_before_comes_back() -> None:
    before = object()
    vars(builtins)[FAKE] = before
    try:
        with own_pybind11_internals("lib"):
            assert FAKE not in vars(builtins)  # hidden: an extension imported here cannot find it
            made = object()
            vars(builtins)[FAKE] = made  # what an extension imported here does
        assert vars(builtins)[FAKE] is before
        assert vars(builtins)[f"{KEPT_PREFIX}lib{FAKE}"] is made
    finally:
        vars(builtins).pop(FAKE, None)
        vars(builtins).pop(f"{KEPT_PREFIX}lib{FAKE}", None)


def test_a_record_made_inside_where_there_was_none_is_not_left_for_later_extensions() -> None:
    with own_pybind11_internals("first"):
        made = object()
        vars(builtins)[FAKE] = made
    try:
        assert FAKE not in vars(builtins)
        assert vars(builtins)[f"{KEPT_PREFIX}first{FAKE}"] is made
    finally:
        vars(builtins).pop(f"{KEPT_PREFIX}first{FAKE}", None)


FRESH_PROCESS = textwrap.dedent("""
    import onnx, torch
    from onnx import TensorProto, helper
    from fuzzer.support.pybind_internals import INTERNALS_PREFIX, KEPT_PREFIX, places

    def records():
        return {key: value for where in places() for key, value in where.items()
                if isinstance(key, str) and key.startswith((INTERNALS_PREFIX, KEPT_PREFIX))}

    torchs = records()
    assert torchs and all(key.startswith(INTERNALS_PREFIX) for key in torchs), torchs
    from fuzzer.converters.runtime import ort
    after = records()
    assert all(after[key] is value for key, value in torchs.items()), "torch's record was replaced"
    kept = [key for key in after if key.startswith(KEPT_PREFIX + "onnxruntime")]
    assert len(kept) == 1, after
    assert [n.kind() for n in torch.jit.trace(torch.nn.ReLU(), torch.ones(2)).graph.nodes()] == ["aten::relu"]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    import numpy as np
    assert session.run(None, {"x": np.array([1.0, -2.0], np.float32)})[0].tolist() == [-1.0, 2.0]
    try:
        ort.InferenceSession(b"not a model", providers=["CPUExecutionProvider"])
    except Exception as exc:
        print(type(exc).__module__, type(exc).__name__)
""")


@pytest.mark.slow
def test_onnx_runtime_imported_by_convsmith_leaves_torch_its_record_and_still_works() -> None:
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["onnxruntime.capi.onnxruntime_pybind11_state", "InvalidProtobuf"]
