"""A hang's signature holds the frame its stack was caught in, which varies from run to run: a reduced graph that
still hangs in the same converter at the same stage keeps the case's bug, whatever frame it was caught in."""

from __future__ import annotations

from fuzzer.reduce.case import same_hang
from oracles.verdict import Stage, Symptom, Verdict


def _hang(converter: str, frame: str, stage: Stage = Stage.NONE) -> Verdict:
    return Verdict(Symptom.HANG, stage, converter, signature=f"crash-{converter}-{stage.value}-HANG-{frame}",
                   message=f"hang: no result after 60 s in {frame}")


def test_a_hang_caught_in_another_frame_is_the_same_hang() -> None:
    original = _hang("onnx2tf", "inspect.py:1393 in getfullargspec")
    assert same_hang(original, _hang("onnx2tf", "ops/Loop.py:210 in make_node"))


def test_another_converter_stage_or_symptom_is_not() -> None:
    original = _hang("onnx2tf", "inspect.py:1393 in getfullargspec")
    assert not same_hang(original, _hang("tf2onnx", "inspect.py:1393 in getfullargspec"))
    assert not same_hang(original, _hang("onnx2tf", "inspect.py:1393", Stage.RUNTIME_EXECUTION))
    crash = Verdict(Symptom.CRASH, Stage.NONE, "onnx2tf", signature="crash-onnx2tf-none-ValueError-1")
    assert not same_hang(original, crash) and not same_hang(crash, original)
