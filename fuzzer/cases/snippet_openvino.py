"""The few lines of a report for OpenVINO's converters: the module converted by its PyTorch frontend, or
upstream.onnx read by its ONNX frontend, compiled on the CPU plugin under the case's hints and run, against eager
PyTorch or ONNX Runtime. A crash raises at the frontend's or the plugin's own line; a divergence prints both sides,
then asserts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuzzer.cases.repro import identifier
from fuzzer.cases.snippet_tf import compare, graph_comment, input_lines, upstream_inputs
from fuzzer.converters.describe import Snippet

# The CPU plugin has no float64 kernels and computes such a model in float32, as its documentation says: the
# comparison takes its outputs back to the expected dtype, as the oracle does, so only the values are judged.
WIDENED = ("def as_expected(g, w):  # float64 is computed in float32 by the CPU plugin, by design",
           "    return g.astype(w.dtype) if w.dtype == np.float64 and g.dtype == np.float32 else g", "")


def openvino_torch_snippet(module: str, input_lines: Sequence[str], call: Snippet,
                           tolerance: tuple[float, float]) -> str:
    """The module (torch code, its inputs as `input_lines`) through the PyTorch frontend's call, against eager."""
    lines = ["import numpy as np", "import onnx", "import torch", *call.imports, "from onnx import numpy_helper", "",
             module, *input_lines, *call.lines, *call.runs,
             "want = [y.detach().numpy() for y in module(*inputs)]", *WIDENED,
             *compare("eager PyTorch", "as_expected(np.asarray(g), w)", tolerance)]
    return "\n".join(_used_imports(lines))


def openvino_onnx_snippet(case: Any, call: Snippet, value: Any, tolerance: tuple[float, float]) -> str | None:
    """upstream.onnx read by the ONNX frontend's call, compiled and run, against ONNX Runtime (optimizations off);
    None where the case saved no upstream.onnx."""
    if case.upstream_model is None:
        return None
    upstream, fed = upstream_inputs(case)
    names = [n for n, _ in fed]
    lines = ["import os", "import tempfile", "", "import numpy as np", "import onnx", "import onnxruntime as ort",
             *call.imports, "from onnx import numpy_helper", "",
             *graph_comment("upstream.onnx, what the frontend reads", upstream),
             'model = onnx.load("upstream.onnx")', *input_lines(case, fed, value),
             f"inputs = [{', '.join(identifier(n) for n in names)}]",
             "options = ort.SessionOptions()",
             "options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL",
             "want = ort.InferenceSession(model.SerializeToString(), options, providers=['CPUExecutionProvider'])"
             f".run(None, dict(zip({names!r}, inputs)))",
             'os.chdir(tempfile.mkdtemp())', 'onnx.save(model, "model.onnx")',
             *call.lines, *call.runs, *WIDENED,
             *compare("ONNX Runtime", "as_expected(np.asarray(g), w)", tolerance)]
    return "\n".join(_used_imports(lines))


def _used_imports(lines: list[str]) -> list[str]:
    """The lines without an import of numpy_helper that nothing after the imports uses."""
    split = lines.index("")
    rest = lines[split:]
    keep = [line for line in dict.fromkeys(lines[:split])
            if "numpy_helper" not in line or any("numpy_helper." in later for later in rest)]
    if not any("onnx." in later or later.startswith("model = onnx") for later in rest):
        keep = [line for line in keep if line not in ("import onnx",) or any("numpy_helper" in k for k in keep)]
    return keep + rest


__all__: Sequence[str] = ("openvino_onnx_snippet", "openvino_torch_snippet")
