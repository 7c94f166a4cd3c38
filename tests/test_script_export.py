"""The TorchScript exporter is tested as users call it (torch.onnx.export on the nn.Module), with the jit.trace'd
ScriptModule path as a setting; a failure inside torch's tracer is the capture stage either way."""

from __future__ import annotations

import pytest
import torch

from fuzzer.cases.case_json import recorded_options
from fuzzer.converters.conversion import Source, StageError, Steps
from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
from generators.generator import GenOptions, generate
from oracles.verdict import Stage


class RaisingModule(torch.nn.Module):
    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the model cannot be traced")


@pytest.mark.parametrize("script_module", [False, True])
def test_an_error_raised_while_torch_traces_the_module_is_the_capture_stage(script_module: bool) -> None:
    graph = generate(3, GenOptions(nodes=2))
    inputs = tuple(torch.ones(graph.types[n].shape, dtype=graph.types[n].dtype.torch) for n in graph.inputs)
    source = Source(graph, RaisingModule(), inputs)  # type: ignore[arg-type]
    with pytest.raises(StageError) as info:
        export_script(source, ScriptOptions(script_module=script_module), Steps())
    assert info.value.failure.stage is Stage.CAPTURE
    assert "the model cannot be traced" in info.value.failure.message


def test_the_snippet_shows_the_trace_only_for_the_script_module_setting() -> None:
    from fuzzer.converters import CONVERTERS

    converter = CONVERTERS["torch-onnx-script"]
    assert not any("jit.trace" in line for line in converter.snippet(ScriptOptions()).lines)
    assert any("jit.trace" in line for line in converter.snippet(ScriptOptions(script_module=True)).lines)


def test_a_case_written_before_the_setting_existed_replays_the_script_module_export() -> None:
    older = {"opset": 17, "constant_folding": True}
    assert recorded_options("torch-onnx-script", older) == {**older, "script_module": True}
    assert recorded_options("torch-onnx-script", {**older, "script_module": False})["script_module"] is False
    assert recorded_options("onnxsim", {"upstream": "torch-onnx-dynamo"}) == {"upstream": "torch-onnx-dynamo"}
