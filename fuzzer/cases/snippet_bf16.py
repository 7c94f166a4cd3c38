"""What a report snippet adds where a case has bfloat16 tensors: ONNX Runtime's Python API takes and gives no
bfloat16 numpy arrays, so the snippet feeds them as OrtValues of their 16-bit words and reads bfloat16 outputs from
their buffers, widened to float32 (exact), as the harness does (fuzzer/converters/runtime.py)."""

from __future__ import annotations

from typing import Any

IMPORTS = ("import ctypes",)
HELPERS = (
    "def ort_value(x):  # ONNX Runtime's numpy API takes no bfloat16: it goes in as its 16-bit words",
    "    x = np.asarray(x)",
    "    if x.dtype.name == 'bfloat16':",
    "        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x.view(np.uint16), onnx.TensorProto.BFLOAT16)",
    "    return ort.OrtValue.ortvalue_from_numpy(x)",
    "",
    "def from_ort_value(v):  # a bfloat16 output, read from its buffer and widened to float32 (exact)",
    "    if v.data_type() != 'tensor(bfloat16)':",
    "        return v.numpy()",
    "    words = np.frombuffer(ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()), dtype=np.uint16)",
    "    return (words.astype(np.uint32) << 16).view(np.float32).reshape(v.shape())",
    "",
)
# A torch tensor as the numpy array ONNX Runtime is fed (a bfloat16 one through float32, exactly), and an output as
# the float32 the bfloat16 outputs are widened to.
TORCH_FEEDS = ("[x.float().numpy().astype(ml_dtypes.bfloat16) if x.dtype == torch.bfloat16 else x.numpy() "
               "for x in inputs]")
TORCH_IMPORTS = ("import ml_dtypes",)
TORCH_WANT = ("[y.detach().float().numpy() if y.dtype == torch.bfloat16 else y.detach().numpy() "
              "for y in module(*inputs)]")


def run_line(feeds: str) -> str:
    """The session's run through OrtValues, inside the snippet's `run` (`session` made above it)."""
    return ("    return [from_ort_value(v) for v in session.run_with_ort_values(None, dict(zip([i.name for i in "
            f"session.get_inputs()], [ort_value(x) for x in {feeds}])))]")


def has_bfloat16(case: Any) -> bool:
    """Whether the case feeds or gets a bfloat16 tensor."""
    outputs = (case.graph.types[o].dtype.value for o in case.graph.outputs)
    return any(x.dtype.name == "bfloat16" for x in case.inputs) or "bfloat16" in outputs
