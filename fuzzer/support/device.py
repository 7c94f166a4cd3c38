"""Where a check runs: the CPU, or a CUDA GPU (torch on the GPU, ONNX Runtime with its CUDA execution provider)."""

from __future__ import annotations

from fuzzer.support.errors import CannotRun, UsageError

DEVICES = ("cpu", "cuda")


def require_device(device: str, asker: str) -> None:
    """A UsageError for an unknown device, CannotRun when it is not usable here; `asker` names who wants it (a
    flag, a case)."""
    if device not in DEVICES:
        raise UsageError(f"{asker}: unknown device {device!r} (cpu or cuda)")
    if device == "cpu":
        return
    import torch

    from fuzzer.support.pybind_internals import own_pybind11_internals

    with own_pybind11_internals("onnxruntime"):
        import onnxruntime

    if not torch.cuda.is_available():
        raise CannotRun(f"{asker}: no CUDA GPU is visible to torch here")
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        raise CannotRun(f"{asker}: onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu: "
                        "make install GPU=1)")
