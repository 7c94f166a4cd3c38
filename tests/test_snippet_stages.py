"""A snippet runs ONNX Runtime only for a failure ONNX Runtime shows: a conversion's crash stops at the converter, so
its snippet is written for bfloat16 inputs too (which the few lines cannot feed to ONNX Runtime) and runs alone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from fuzzer.cases.case import case_from_result, case_log, collect_versions
from fuzzer.cases.folder import write_case
from fuzzer.cases.snippet import render_snippet
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters.torch_onnx_script import TorchOnnxScript
from generators.builder import GraphBuilder
from generators.dtypes import DType
from oracles.verdict import Stage, Symptom, Verdict


def bfloat16_case(stage: Stage):
    b = GraphBuilder()
    x = b.input((3, 4), DType.BFLOAT16)
    graph = b.build((b.op("relu", (x,), (3, 4), DType.BFLOAT16),))
    converter = TorchOnnxScript()
    result = check_prepared(prepare(graph, 5, {}, 1.0), converter, {"opset": 17})
    crash = Verdict(Symptom.CRASH, stage, converter.name, signature=f"crash-{stage.value}",
                    message="RuntimeError: planted")
    case = case_from_result(dataclasses.replace(result, verdict=crash), graph, 5, converter.name,
                            collect_versions(()), log=case_log(result))
    return case


def test_a_conversion_crash_with_bfloat16_inputs_has_a_snippet_that_runs_alone(tmp_path: Path) -> None:
    case = bfloat16_case(Stage.NODE_CONVERSION)
    snippet = render_snippet(case)
    assert snippet is not None and "bfloat16" in snippet and "InferenceSession" not in snippet
    folder = write_case(tmp_path, case)
    (folder / "snippet.py").write_text(snippet)
    done = subprocess.run([sys.executable, "-I", "snippet.py"], cwd=folder, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-1500:]  # the real exporter converts it: the crash was planted


def test_a_runtime_crash_with_bfloat16_inputs_keeps_to_repro_py() -> None:
    assert render_snippet(bfloat16_case(Stage.RUNTIME_EXECUTION)) is None
