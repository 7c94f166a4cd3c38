"""report.md's snippet for OpenVINO's two routes: written from a real case, run alone in the case folder, it
converts with the real frontend, compiles on the CPU plugin, prints both sides and exits 0 where the graph converts
right (float64 judged as the plugin computes it, in float32), and raises OpenVINO's own error where the frontend
refuses the graph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import hand_graphs
import pytest

from fuzzer.cases.case import case_from_result, case_log, collect_versions
from fuzzer.cases.folder import write_case
from fuzzer.cases.snippet import render_snippet
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from oracles.verdict import Symptom

pytest.importorskip("openvino")

FAST = CheckOptions(rerun=False, locate=False, culprit=False)


def float64_matmul() -> Graph:
    g = GraphBuilder()
    a, b = g.input((3, 4), DType.FLOAT64), g.input((4, 2), DType.FLOAT64)
    return g.build((g.op("matmul", (g.op("sin", (a,), (3, 4), DType.FLOAT64), b), (3, 2), DType.FLOAT64),))


def written(tmp_path: Path, graph: Graph, converter: str, options: dict[str, Any]) -> tuple[Any, Any, Path]:
    """The graph checked by the real converter, written as a case folder."""
    result = check_prepared(prepare(graph, 3, {}, 1.0), CONVERTERS[converter],
                            CONVERTERS[converter].options(options), FAST)
    case = case_from_result(result, graph, 3, converter, collect_versions(()), log=case_log(result))
    return result, case, write_case(tmp_path / "cases", case, converter=CONVERTERS[converter])


def run_alone(snippet: str, folder: Path) -> subprocess.CompletedProcess:
    (folder / "snippet.py").write_text(snippet)
    return subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("name,options,graph", [
    ("openvino-pytorch", {}, hand_graphs.elementwise),
    ("openvino-pytorch", {"capture": "export", "static_shapes": True}, float64_matmul),
    ("openvino-onnx", {"upstream": "torch-onnx-dynamo", "opset": 18}, hand_graphs.elementwise),
    ("openvino-onnx", {"reader": "convert_model", "upstream": "onnx-native", "opset": 17}, float64_matmul),
])
def test_a_snippet_converts_with_the_real_frontend_and_runs_alone(tmp_path: Path, name: str,
                                                                 options: dict[str, Any], graph: Any) -> None:
    result, case, folder = written(tmp_path, graph(), name, options)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    snippet = render_snippet(case)
    assert snippet is not None
    assert "compiled = ov.Core().compile_model(ov_model, 'CPU'" in snippet and "onnxruntime" not in snippet \
        if name == "openvino-pytorch" else "# upstream.onnx, what the frontend reads:" in snippet
    run = run_alone(snippet, folder)
    assert run.returncode == 0, snippet + run.stdout + run.stderr
    expected = "eager PyTorch" if name == "openvino-pytorch" else "ONNX Runtime"
    assert run.stdout.count(f"expected ({expected}):") == len(case.graph.outputs), run.stdout


@pytest.mark.slow
def test_a_frontend_refusal_raises_openvinos_own_error_in_the_snippet(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input((1, 2, 4, 4))
    graph = g.build((g.op("avg_pool2d", (x,), (1, 2, 2, 2), kernel_size=(2, 2), stride=None,
                                padding=(0, 0), ceil_mode=False, count_include_pad=True, divisor_override=3),))
    result, case, folder = written(tmp_path, graph, "openvino-pytorch", {})
    assert result.verdict.symptom is Symptom.UNSUPPORTED, result.verdict.message
    snippet = render_snippet(case)
    assert snippet is not None
    run = run_alone(snippet, folder)
    assert run.returncode == 1 and "do not support divisor_override" in run.stderr, run.stderr[-2000:]
