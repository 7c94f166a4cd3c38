"""A graph as plain PyTorch source: `class Repro(torch.nn.Module)`, one line per node, each written by the operator's
own `torch_source` (tests/test_op_registry.py checks every operator's source against its forward, bit for bit). What
a PyTorch exporter's repro.py and report snippet start from."""

from __future__ import annotations

import keyword
import re

from generators.ir import Graph
from generators.registry import REGISTRY, OpRegistry


def identifier(name: str) -> str:
    """A tensor's IR name as a Python identifier."""
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or keyword.iskeyword(text):
        text = f"v_{text}"
    return text


def render_module(graph: Graph, registry: OpRegistry = REGISTRY) -> str:
    """`class Repro(torch.nn.Module)`: weights loaded from weights/<name>.pb, in forward one line per node, each
    the operator's own plain-PyTorch source."""
    names = {n: identifier(n) for n in graph.types}
    lines = ["class Repro(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for w in graph.weights:
        lines.append(f"        _register(self, {w!r}, load_tensor('weights/{w}.pb'))")
    args = ", ".join(names[n] for n in graph.inputs)
    lines += ["", f"    def forward(self, {args}):"]
    for w in graph.weights:
        lines.append(f"        {names[w]} = self.{w}")
    for node in graph.nodes:
        op = registry[node.op]
        expr = op.torch_source(node.attrs, [names[n] for n in node.inputs])
        # A one-piece split or unbind still returns a tuple: its one output is unpacked from it.
        targets = ", ".join(names[o] for o in node.outputs) + ("," if op.returns_sequence and len(node.outputs) == 1
                                                              else "")
        lines.append(f"        {targets} = {expr}  # {node.op}")
    lines.append(f"        return ({''.join(names[o] + ', ' for o in graph.outputs)})")
    return "\n".join(lines) + "\n"
