"""A TorchScript exporter crash names the node it was exporting: the library frame's `node` local is a
torch._C.Node, whose kind ('aten::view') gives the operator."""

from __future__ import annotations

import torch

from oracles.taxonomy import failing_node_type

# A library frame, as the exporter's symbolic functions run in one: compiled under a site-packages path.
LIBRARY_STEP = "def export_step(node):\n    raise AttributeError(\"'NoneType' object has no attribute 'view'\")\n"


def test_a_torchscript_node_in_a_failing_library_frame_names_its_operator() -> None:
    graph = torch.jit.trace(lambda x: x.view(6), torch.zeros(2, 3)).graph
    node = next(n for n in graph.nodes() if n.kind() == "aten::view")
    namespace: dict[str, object] = {}
    exec(compile(LIBRARY_STEP, "/venv/lib/python3.11/site-packages/planted/export.py", "exec"), namespace)
    try:
        namespace["export_step"](node)  # type: ignore[operator]
    except AttributeError as exc:
        assert failing_node_type(exc) == "view"
    else:
        raise AssertionError("the planted step did not raise")
