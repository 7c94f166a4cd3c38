"""A worker's faulthandler dump names the stage it died in."""

from __future__ import annotations

from pathlib import Path

import fuzzer.converters.torch_onnx_script as script_module
from fuzzer.support.faults import stage_of_fault
from oracles.verdict import Stage

SCRIPT = Path(script_module.__file__).resolve()


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def dump(*frames: tuple[str, int, str]) -> str:
    body = "\n".join(f'  File "{path}", line {line} in {func}' for path, line, func in frames)
    return f"Fatal Python error: Aborted\n\nStack (most recent call first):\n{body}\n"


TORCH = "/venv/lib/python3.11/site-packages/torch/onnx/utils.py"


def test_death_inside_the_exporter_call_is_node_conversion() -> None:
    text = dump((TORCH, 684, "_optimize_graph"), (str(SCRIPT), line_of("torch.onnx.export("), "export_script"),
                ("/x/fuzzer/worker.py", 219, "run_test"))
    assert stage_of_fault(text) is Stage.NODE_CONVERSION


def test_death_while_tracing_is_capture() -> None:
    tracer = "/venv/lib/python3.11/site-packages/torch/jit/_trace.py"
    text = dump((tracer, 130, "forward"), (TORCH, 1, "_trace_and_get_graph_from_model"),
                (str(SCRIPT), line_of("torch.onnx.export("), "export_script"))
    assert stage_of_fault(text) is Stage.CAPTURE


def test_death_in_the_upstream_export_of_an_onnx_to_onnx_converter_is_the_source() -> None:
    text = dump((TORCH, 684, "_optimize_graph"), (str(SCRIPT), line_of("torch.onnx.export("), "export_script"),
                ("/x/fuzzer/converters/upstream.py", 40, "export_upstream"),
                ("/x/fuzzer/converters/ort_optimizer.py", 63, "convert_impl"))
    assert stage_of_fault(text) is Stage.SOURCE


def test_a_dump_without_converter_frames_tells_nothing() -> None:
    assert stage_of_fault(dump((TORCH, 1, "f"), ("/x/fuzzer/worker.py", 219, "run_test"))) is None
    assert stage_of_fault("") is None
