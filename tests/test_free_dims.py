"""ort-optimizer's free_dims setting: the exported model made dynamic (every input dimension named), run unoptimized as
the baseline, then optimized with each name fixed to the input's size (add_free_dimension_override_by_name), as a
deployment with known shapes does; ONNX Runtime's FreeDimensionOverrideTransformer then fires."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import onnx

from fuzzer.cases.case import case_from_result, collect_versions
from fuzzer.cases.folder import write_case
from fuzzer.cases.snippet import render_snippet
from fuzzer.check.pipeline import CheckOptions, run_check
from fuzzer.converters import CONVERTERS
from fuzzer.converters.runtime import free_dimension_sizes, symbolic_inputs
from fuzzer.converters.setting import Hints
from generators.builder import GraphBuilder
from generators.dtypes import DType

OPTIONS = {"level": "all", "upstream": "torch-onnx-dynamo", "opset": 18, "free_dims": True}


def relu_add():  # noqa: ANN201
    b = GraphBuilder()
    x, y = b.input((2, 3), DType.FLOAT32), b.input((2, 3), DType.FLOAT32)
    return b.build((b.op("add", (b.op("relu", (x,), (2, 3)), y), (2, 3)),))


def test_named_dims_are_fixed_by_name_and_the_override_fires() -> None:
    result = run_check(relu_add(), 0, "ort-optimizer", OPTIONS, CheckOptions(rerun=False))
    assert result.verdict.symptom.json_name == "pass" and result.target is not None
    assert "FreeDimensionOverrideTransformer" in result.target.rewrites
    model = onnx.load_from_string(result.target.model)
    assert [[d.dim_param for d in i.type.tensor_type.shape.dim] for i in model.graph.input] == [
        ["in0_0", "in0_1"], ["in1_0", "in1_1"]]
    assert symbolic_inputs(result.target.model) == result.target.model  # naming twice changes nothing
    sizes = free_dimension_sizes(result.target.model, ["x", "y"], list(result.expected.source.inputs))
    assert sizes == {"in0_0": 2, "in0_1": 3, "in1_0": 2, "in1_1": 3}
    plain = run_check(relu_add(), 0, "ort-optimizer", {**OPTIONS, "free_dims": False}, CheckOptions(rerun=False))
    assert "FreeDimensionOverrideTransformer" not in plain.target.rewrites


def test_a_free_dims_case_replays_alone_and_its_snippet_fixes_the_dims_too(tmp_path: Path) -> None:
    graph = relu_add()
    result = run_check(graph, 0, "ort-optimizer", OPTIONS, CheckOptions(rerun=False))
    case = case_from_result(result, graph, 0, "ort-optimizer", collect_versions(("onnxruntime",)))
    folder = write_case(tmp_path / "cases", case)
    snippet = render_snippet(case)
    assert snippet is not None and "add_free_dimension_override_by_name" in snippet and "free_dims=True" in snippet
    alone = tmp_path / "alone"
    shutil.copytree(folder, alone)
    (alone / "snippet.py").write_text(snippet)
    for script in ("repro.py", "snippet.py"):  # the check passed: each runs to the end, no bug to show
        done = subprocess.run([sys.executable, "-I", script], cwd=alone, capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, script + done.stdout[-1500:] + done.stderr[-1500:]
    assert "'free_dims': True" in (alone / "repro.py").read_text()


def test_leaving_the_dims_free_is_offered_as_a_workaround() -> None:
    converter = CONVERTERS["ort-optimizer"]
    settings = converter.avoid_settings(converter.options(OPTIONS), Hints())
    assert settings[0].options["free_dims"] is False and settings[0].options["level"] == "all"
    assert [s.options["level"] for s in settings[1:]] == ["extended", "basic"]
    assert all(s.options["free_dims"] for s in settings[1:])
    plain = converter.avoid_settings(converter.options({**OPTIONS, "free_dims": False}), Hints())
    assert [s.options["level"] for s in plain] == ["extended", "basic"]
