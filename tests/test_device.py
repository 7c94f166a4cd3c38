"""Device plumbing: ONNX Runtime providers, the worker's address-space limit, and (on a machine with a CUDA GPU
and onnxruntime-gpu) a real check with the source and ONNX Runtime on the GPU."""

from __future__ import annotations

from pathlib import Path

import hand_graphs
import onnxruntime
import pytest
import torch

from fuzzer.check.pipeline import CheckOptions, run_check
from fuzzer.converters.runtime import providers_for
from fuzzer.support.confine import address_space_limit
from fuzzer.support.device import float32_without_tf32, require_device
from fuzzer.support.errors import UsageError
from oracles.verdict import Symptom

HAS_CUDA = torch.cuda.is_available() and "CUDAExecutionProvider" in onnxruntime.get_available_providers()


@pytest.mark.parametrize(("device", "providers"), [
    ("cpu", ["CPUExecutionProvider"]),
    ("cuda", [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]),
])
def test_providers_follow_the_device(device: str, providers: list[str]) -> None:
    assert providers_for(device) == providers


def test_a_cuda_source_keeps_float32_products_in_float32() -> None:
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        float32_without_tf32()
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_an_unknown_device_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        providers_for("tpu")


@pytest.mark.parametrize(("device", "memory_mb", "limit"), [
    ("cpu", 4096, 1000 + 4096 * 2**20),
    ("cpu", 0, None),
    ("cuda", 4096, None),  # the CUDA runtime maps far more address space than it uses
])
def test_address_space_limit(device: str, memory_mb: int, limit: int | None) -> None:
    assert address_space_limit(memory_mb, device, 1000) == limit


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and onnxruntime-gpu")
@pytest.mark.parametrize("converter", ["torch-onnx-script", "torch-onnx-dynamo", "ort-optimizer"])
def test_a_graph_checks_on_the_gpu(converter: str) -> None:
    result = run_check(hand_graphs.conv_relu_add(), 0, converter, check_options=CheckOptions(rerun=False),
                       device="cuda")
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    assert result.expected is not None and result.expected.source.inputs[0].is_cuda


def test_require_device_names_what_is_missing() -> None:
    require_device("cpu", "--device cpu")
    with pytest.raises(UsageError, match=r"^case-x: unknown device 'tpu' \(cpu or cuda\)$"):
        require_device("tpu", "case-x")


@pytest.mark.skipif(HAS_CUDA, reason="checks the refusal on a machine without a usable GPU")
def test_a_case_found_on_the_gpu_is_refused_in_one_line_here(tmp_path: Path, capsys) -> None:
    from test_case import make_case

    from fuzzer.cases.case import CaseData
    from fuzzer.cases.folder import write_case
    from fuzzer.commands import main as cli

    case = make_case()
    folder = write_case(tmp_path, CaseData(**{**case.__dict__, "device": "cuda", "converter": "torch-onnx-script"}))
    for command in ("repro", "reduce"):
        assert cli.main([command, str(folder)]) == 3  # cannot run here: no GPU
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "(found on cuda)" in err and "Traceback" not in err, err
