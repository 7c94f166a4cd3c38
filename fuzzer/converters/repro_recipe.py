"""How a converter's repro.py is assembled: the harness modules (fuzzer/cases/harness/) of a script that starts from
the source model and of one that starts from the saved upstream.onnx, the harness functions that take
convert_and_run's place in each, and the model part an exporter's framework writes."""

from __future__ import annotations

from collections.abc import Mapping

from generators.ir import Graph
from generators.torch_source import render_module

# The harness modules of a repro.py that starts from a PyTorch source model, head first.
TORCH_HARNESS = ("head", "torch_tensors", "runtime", "judging", "child", "export", "from_torch")
# Those of a repro.py that starts from the saved upstream.onnx and needs no torch.
UPSTREAM_HARNESS = ("head", "numpy_tensors", "runtime", "judging", "child", "from_upstream")


class ReproRecipe:
    """The harness modules (head first; the model part is rendered for the converter's framework) and the harness
    function that converts, of a script from the source model and of one from upstream.onnx."""

    source_harness: tuple[str, ...] = TORCH_HARNESS
    upstream_harness: tuple[str, ...] = UPSTREAM_HARNESS
    repro_conversion: str = ""
    repro_upstream_conversion: str = ""
    # An upstream exporter's harness function that remakes the model the ONNX tools received ("": the saved
    # upstream.onnx is used as it is).
    repro_upstream_export: str = ""

    def repro_model(self, graph: Graph) -> Mapping[str, str]:
        """The definitions a repro.py that starts from the source model has its model in (name: source), as this
        exporter's framework writes the graph: PyTorch's `Repro` module by default."""
        return {"Repro": render_module(graph)}
