"""A snippet runs ONNX Runtime only for a failure ONNX Runtime shows: a conversion's crash stops at the converter;
a failure at the runtime with bfloat16 tensors feeds them to ONNX Runtime as OrtValues and reads them back, and both
snippets run alone."""

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


def bfloat16_case(stage: Stage, reshaped: bool = False):
    """A relu (or, `reshaped`, a flatten: ONNX Runtime's CPU kernels of Reshape take bfloat16, of Relu not) on a
    bfloat16 input, exported for real, with a planted crash at `stage`."""
    b = GraphBuilder()
    x = b.input((3, 4), DType.BFLOAT16)
    node = b.op("flatten", (x,), (12,), DType.BFLOAT16, start_dim=0, end_dim=-1) if reshaped else \
        b.op("relu", (x,), (3, 4), DType.BFLOAT16)
    graph = b.build((node,))
    converter = TorchOnnxScript()
    result = check_prepared(prepare(graph, 5, {}, 1.0), converter, {"opset": 17})
    crash = Verdict(Symptom.CRASH, stage, converter.name, signature=f"crash-{stage.value}",
                    message="RuntimeError: planted")
    case = case_from_result(dataclasses.replace(result, verdict=crash), graph, 5, converter.name,
                            collect_versions(()), log=case_log(result))
    return case


def run_alone(tmp_path: Path, case, snippet: str) -> subprocess.CompletedProcess[str]:
    folder = write_case(tmp_path, case)
    (folder / "snippet.py").write_text(snippet)
    return subprocess.run([sys.executable, "-I", "snippet.py"], cwd=folder, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})


def test_a_conversion_crash_with_bfloat16_inputs_has_a_snippet_that_runs_alone(tmp_path: Path) -> None:
    case = bfloat16_case(Stage.NODE_CONVERSION)
    snippet = render_snippet(case)
    assert snippet is not None and "bfloat16" in snippet and "InferenceSession" not in snippet
    done = run_alone(tmp_path, case, snippet)
    assert done.returncode == 0, done.stderr[-1500:]  # the real exporter converts it: the crash was planted


def test_a_runtime_failure_with_bfloat16_tensors_has_a_snippet_that_feeds_them_as_ort_values(tmp_path: Path) -> None:
    case = bfloat16_case(Stage.RUNTIME_EXECUTION, reshaped=True)
    snippet = render_snippet(case)
    assert snippet is not None and "ortvalue_from_numpy_with_onnx_type" in snippet and "from_ort_value(v)" in snippet
    done = run_alone(tmp_path, case, snippet)
    # The real export computes the flatten right in bfloat16: the snippet fed, ran and compared it (a planted crash).
    assert done.returncode == 0, done.stderr[-1500:]
