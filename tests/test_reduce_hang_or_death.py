"""The signature of a hang or a worker's death holds the frame its stack was caught in, which varies from run to
run: a reduced graph that still hangs, or still dies by the same signal, in the same converter at the same stage
keeps the case's bug, whatever frame it was caught in."""

from __future__ import annotations

from fuzzer.reduce.case import same_hang_or_death
from oracles.verdict import Stage, Symptom, Verdict


def _hang(converter: str, frame: str, stage: Stage = Stage.NONE) -> Verdict:
    return Verdict(Symptom.HANG, stage, converter, signature=f"crash-{converter}-{stage.value}-HANG-{frame}",
                   message=f"hang: no result after 60 s in {frame}")


def test_a_hang_caught_in_another_frame_is_the_same_hang_or_death() -> None:
    original = _hang("onnx2tf", "inspect.py:1393 in getfullargspec")
    assert same_hang_or_death(original, _hang("onnx2tf", "ops/Loop.py:210 in make_node"))


def test_another_converter_stage_or_symptom_is_not() -> None:
    original = _hang("onnx2tf", "inspect.py:1393 in getfullargspec")
    assert not same_hang_or_death(original, _hang("tf2onnx", "inspect.py:1393 in getfullargspec"))
    assert not same_hang_or_death(original, _hang("onnx2tf", "inspect.py:1393", Stage.RUNTIME_EXECUTION))
    crash = Verdict(Symptom.CRASH, Stage.NONE, "onnx2tf", signature="crash-onnx2tf-none-ValueError-1")
    assert not same_hang_or_death(original, crash) and not same_hang_or_death(crash, original)


def _death(frame: str, signal: str = "SIGSEGV") -> Verdict:
    return Verdict(Symptom.PROCESS_DEATH, Stage.NONE, "onnx2tf", signature=f"crash-onnx2tf-none-PROCESS_DEATH-{frame}",
                   message=f"process_death: killed by {signal} in {frame}")


def test_a_death_by_the_same_signal_caught_in_another_frame_is_the_same_defect() -> None:
    """onnx2tf's segfaults in TensorFlow's C++ are caught wherever the Python stack stood: three of an hour's cases
    were given up for a reduced graph that died by SIGSEGV in another frame."""
    original = _death("tensorflow/python/framework/ops.py:1078 in _create_c_op")
    assert same_hang_or_death(original, _death("tensorflow/python/eager/execute.py:53 in quick_execute"))
    assert not same_hang_or_death(original, _death("ops.py:1078 in _create_c_op", "SIGABRT"))
    assert not same_hang_or_death(original, _hang("onnx2tf", "ops.py:1078 in _create_c_op"))
    unknown = Verdict(Symptom.PROCESS_DEATH, Stage.NONE, "onnx2tf", message="process_death: exited with status 3")
    assert not same_hang_or_death(unknown, unknown)
