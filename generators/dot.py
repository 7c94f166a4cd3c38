"""A Graphviz DOT picture of a graph: inputs, weights, operator nodes and outputs with their types."""

from __future__ import annotations

from generators.ir import Graph, TensorType


def _label(ttype: TensorType) -> str:
    dims = "x".join(str(d) for d in ttype.shape) or "scalar"
    return f"{ttype.dtype.value}[{dims}]"


def _attrs(attrs: dict) -> str:
    return "\\n".join(f"{k}={v}" for k, v in sorted(attrs.items()))


def to_dot(graph: Graph) -> str:
    """DOT text: one box per operator, one ellipse per graph input/weight/output, edges labelled by type."""
    lines = ["digraph convsmith {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    producer: dict[str, str] = {}
    for table, colour in ((graph.inputs, "#dbe9f6"), (graph.weights, "#eeeeee")):
        for name, ttype in table.items():
            label = f"{name}\\n{_label(ttype)}"
            lines.append(f'  "{name}" [shape=ellipse, style=filled, fillcolor="{colour}", label="{label}"];')
            producer[name] = name
    for i, node in enumerate(graph.nodes):
        node_id = f"op{i}"
        extra = _attrs(dict(node.attrs))
        label = f"{node.op}" + (f"\\n{extra}" if extra else "")
        lines.append(f'  "{node_id}" [shape=box, style="rounded,filled", fillcolor="#fff2cc", label="{label}"];')
        for name in node.inputs:
            lines.append(f'  "{producer[name]}" -> "{node_id}" [label="{name}: {_label(graph.types[name])}"];')
        for name in node.outputs:
            producer[name] = node_id
    for name in graph.outputs:
        lines.append(f'  "out:{name}" [shape=ellipse, style=filled, fillcolor="#d9ead3", label="{name}"];')
        if name in producer:  # a signature graph (a zoo model's, a cut's) has no node writing it
            lines.append(f'  "{producer[name]}" -> "out:{name}" [label="{_label(graph.types[name])}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
