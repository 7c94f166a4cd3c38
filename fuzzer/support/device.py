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


def float32_without_tf32() -> None:
    """Keep torch's float32 convolutions and matrix products in float32 on CUDA (cuDNN takes TF32 by default).

    TF32 keeps 10 bits of mantissa: the oracle's float32 tolerances and the float64 reference would read that
    rounding as divergences. The switches are per process, as torch keeps them; the CPU ignores them."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
