"""A worker's faulthandler dump names the stage it died in; a heap-corruption abort is one signature."""

from __future__ import annotations

from pathlib import Path

import fuzzer.converters.torch_onnx_script as script_module
from fuzzer.support.faults import heap_check, lost_verdict, read_fault, stage_of_fault
from oracles.verdict import Stage, Symptom

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


def write_fault(log_dir: Path, pid: int, frame: tuple[str, int, str], log_tail: str) -> None:
    (log_dir / f"worker-{pid}.fault").write_text(
        dump(frame, (str(SCRIPT), line_of("torch.onnx.export("), "export_script")))
    (log_dir / f"worker-{pid}.log").write_text("a warning torch printed earlier\n" + log_tail)


def test_heap_corruption_aborts_in_any_frame_are_one_signature(tmp_path: Path) -> None:
    """glibc notices a corrupted heap wherever the next allocation meets it: the frame is left out of the signature,
    and the message keeps glibc's line and the frame for the reader."""
    write_fault(tmp_path, 1, (TORCH, 684, "_optimize_graph"), "free(): invalid pointer\n")
    write_fault(tmp_path, 2, (TORCH, 242, "_add_op"), "malloc_consolidate(): invalid chunk size\n")
    first, second = (lost_verdict("torch-onnx-script", Symptom.PROCESS_DEATH, "killed by SIGABRT",
                                  read_fault(tmp_path, pid)) for pid in (1, 2))
    assert first.signature == second.signature
    assert first.stage is Stage.NODE_CONVERSION
    assert first.message == ("process_death: killed by SIGABRT, heap corruption detected by glibc "
                             "(free(): invalid pointer) in torch/onnx/utils.py:684 in _optimize_graph")


def test_other_deaths_keep_their_frame_in_the_signature(tmp_path: Path) -> None:
    write_fault(tmp_path, 1, (TORCH, 684, "_optimize_graph"), "")
    write_fault(tmp_path, 2, (TORCH, 242, "_add_op"), "")
    first, second = (lost_verdict("torch-onnx-script", Symptom.PROCESS_DEATH, "killed by SIGSEGV",
                                  read_fault(tmp_path, pid)) for pid in (1, 2))
    assert read_fault(tmp_path, 1).heap_check == ""
    assert first.signature != second.signature


def test_heap_check_reads_glibc_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    for line, expected in [("double free or corruption (out)", "double free or corruption (out)"),
                           ("munmap_chunk(): invalid pointer", "munmap_chunk(): invalid pointer"),
                           ("corrupted size vs. prev_size", "corrupted size vs. prev_size"),
                           ("UserWarning: invalid value encountered", ""), ("forward(): ok", "")]:
        log.write_text(f"noise\n{line}\n")
        assert heap_check(log) == expected, line
    assert heap_check(tmp_path / "missing.log") == ""
