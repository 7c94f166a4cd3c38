"""A Graphviz DOT picture of the located node's neighbourhood in the converted model: the nodes within a few edges of
it, the located one in red, each labelled with its op type, name and the divergence of its output where known."""

from __future__ import annotations

import onnx

from fuzzer.modelcheck.locate import Location

REACH = 2  # edges either side of the located node


def _near(model: onnx.ModelProto, index: int) -> list[int]:
    """The indices of the nodes within REACH edges of node `index`, in model order."""
    nodes = model.graph.node
    readers: dict[str, list[int]] = {}
    writers: dict[str, int] = {}
    for i, node in enumerate(nodes):
        writers.update({o: i for o in node.output})
        for value in node.input:
            readers.setdefault(value, []).append(i)
    found, frontier = {index}, {index}
    for _ in range(REACH):
        step = set()
        for i in frontier:
            step.update(writers[v] for v in nodes[i].input if v in writers)
            step.update(r for v in nodes[i].output for r in readers.get(v, ()))
        frontier = step - found
        found |= step
    return sorted(found)


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def neighbourhood_dot(target: bytes, where: Location) -> str:
    """DOT text of the located node and its neighbours, edges labelled by the values they carry."""
    model = onnx.load_from_string(target)
    near = _near(model, where.index)
    lines = ["digraph located {", '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];']
    for i in near:
        node = model.graph.node[i]
        colour = "#f4cccc" if i == where.index else "#fff2cc"
        note = f"\\nafter: {where.after:.3g}" if i == where.index else ""
        lines.append(f'  n{i} [fillcolor="{colour}", label="{_quoted(node.op_type)}\\n{_quoted(node.name)}{note}"];')
    writers = {o: i for i in near for o in model.graph.node[i].output}
    for i in near:
        for value in model.graph.node[i].input:
            if value in writers:
                lines.append(f'  n{writers[value]} -> n{i} [label="{_quoted(value)}", fontsize=8];')
    lines.append("}")
    return "\n".join(lines) + "\n"
