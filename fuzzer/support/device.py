"""Where a check runs: the CPU, or a CUDA GPU (torch on the GPU, ONNX Runtime with its CUDA execution provider)."""

from __future__ import annotations

from fuzzer.support.errors import UsageError

DEVICES = ("cpu", "cuda")


def require_device(device: str, asker: str) -> None:
    """Raise a one-line UsageError unless `device` can run here; `asker` names who wants it (a flag, a case)."""
    if device not in DEVICES:
        raise UsageError(f"{asker}: unknown device {device!r} (cpu or cuda)")
    if device == "cpu":
        return
    import onnxruntime
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"{asker}: no CUDA GPU is visible to torch here")
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        raise UsageError(f"{asker}: onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu: "
                         "make install GPU=1)")
