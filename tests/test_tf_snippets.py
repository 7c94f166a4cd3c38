"""report.md's snippet for onnx2tf and tf2onnx cases: written from a real case, run alone in the case folder, it
calls the real converter as convsmith did, prints both sides and exits 0 (these graphs convert right)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

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

FAST = CheckOptions(rerun=False, locate=False, culprit=False)


def nchw_graph() -> Graph:
    """An NCHW input (which onnx2tf would move to channels-last) beside a rank-2 one, and a weight."""
    b = GraphBuilder()
    x, y, w = b.input((1, 2, 3, 4)), b.input((2, 3)), b.weight((2,))
    return b.build((b.op("prelu", (x, w), (1, 2, 3, 4)), b.op("sin", (y,), (2, 3))))


def written_case(tmp_path: Path, converter: str, options: dict[str, Any]) -> tuple[Any, Path]:
    """The graph checked by the real converter (it passes), written as a case folder."""
    ok, reason = CONVERTERS[converter].availability()
    if not ok:
        pytest.skip(reason)
    graph = nchw_graph()
    result = check_prepared(prepare(graph, 3, {}, 1.0), CONVERTERS[converter], options, FAST)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    case = case_from_result(result, graph, 3, converter, collect_versions(()), log=case_log(result))
    return case, write_case(tmp_path / "cases", case, converter=CONVERTERS[converter])


def run_alone(snippet: str, folder: Path) -> str:
    """The snippet run by itself in the case folder: its printout (it must exit 0)."""
    (folder / "snippet.py").write_text(snippet)
    run = subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, snippet + "\n" + run.stdout + run.stderr
    return run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("target", ["keras", "tflite"])
def test_an_onnx2tf_snippet_converts_upstream_onnx_and_runs_alone(tmp_path: Path, target: str) -> None:
    options = {"opset": 18, "target": target, "upstream": "torch-onnx-dynamo", "onnxsim": True}
    case, folder = written_case(tmp_path, "onnx2tf", options)
    snippet = render_snippet(case)
    assert snippet is not None
    assert "onnx2tf.convert(" in snippet and "keep_ncw_or_nchw_or_ncdhw_input_names=nchw_inputs" in snippet
    assert "nchw_inputs = ['in0']" in snippet and "# upstream.onnx, what the converter received:" in snippet
    assert "= PRelu(" in snippet and "= Sin(" in snippet
    upstream = (folder / "upstream.onnx").read_bytes()
    printed = run_alone(snippet, folder)
    assert printed.count("expected (ONNX Runtime): float32 (1, 2, 3, 4)") == 1
    assert printed.count("observed: float32 (1, 2, 3, 4)") == 1 and printed.count("observed: float32 (2, 3)") == 1
    # onnx2tf's onnxsim pass rewrites the file it converts: the snippet converts a copy, elsewhere
    assert (folder / "upstream.onnx").read_bytes() == upstream and not (folder / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("options", [{"source": "function"}, {"source": "keras", "optimize": False}])
def test_a_tf2onnx_snippet_builds_the_tensorflow_function_and_runs_alone(tmp_path: Path,
                                                                         options: dict[str, Any]) -> None:
    case, folder = written_case(tmp_path, "tf2onnx", {"opset": 17, **options})
    snippet = render_snippet(case)
    assert snippet is not None
    call = "from_function" if options["source"] == "function" else "from_keras"
    assert f"tf2onnx.convert.{call}(model, input_signature=signature, opset=17" in snippet
    assert "def make_model(weights):" in snippet and "# the converter's model.onnx:" in snippet
    assert "import torch" not in snippet
    printed = run_alone(snippet, folder)
    assert printed.count("expected (TensorFlow eager): float32 (1, 2, 3, 4)") == 1
    assert printed.count("observed: float32 (2, 3)") == 1


@pytest.mark.slow
def test_a_tf2onnx_snippet_with_bfloat16_tensors_runs_alone_and_shows_what_the_case_found(tmp_path: Path) -> None:
    """ONNX Runtime's numpy API takes no bfloat16: the snippet feeds OrtValues and reads them back, and comes to
    the case's verdict by itself (tf2onnx's bfloat16 handling may be wrong: then both say so)."""
    b = GraphBuilder()
    x = b.input((3, 4), DType.BFLOAT16)
    graph = b.build((b.op("flatten", (x,), (12,), DType.BFLOAT16, start_dim=0, end_dim=-1),))
    result = check_prepared(prepare(graph, 3, {}, 1.0), CONVERTERS["tf2onnx"], {"opset": 17}, FAST)
    case = case_from_result(result, graph, 3, "tf2onnx", collect_versions(()), log=case_log(result))
    folder = write_case(tmp_path / "cases", case, converter=CONVERTERS["tf2onnx"])
    snippet = render_snippet(case)
    assert snippet is not None and "ortvalue_from_numpy_with_onnx_type" in snippet
    (folder / "snippet.py").write_text(snippet)
    run = subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    verdict = result.verdict
    if verdict.symptom is Symptom.PASS:
        assert run.returncode == 0, run.stderr[-1500:]
    elif verdict.symptom.is_divergence:
        assert run.returncode == 1 and "AssertionError" in run.stderr, (verdict, run.stderr[-1500:])
    else:  # the same error, raised by the snippet (tf2onnx 1.17 declares the bfloat16 input float16)
        assert run.returncode == 1 and verdict.message.splitlines()[0][-60:] in run.stderr, (verdict, run.stderr)
