"""The model just before and just after the one rewrite a finding is blamed on, for its report: what the transformer
or pass received and what it made of it (after is None where the rewrite itself fails)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx


@dataclass(frozen=True)
class RewriteView:
    """One rewrite's input and output models (serialized), and why there is no output where there is none."""

    rewrite: str  # as its tool names it: "graph transformer `FastGeluFusion`", "pass `fuse_bn_into_conv`"
    before_is: str  # what `before` is: "the model at level all with it disabled"
    before: bytes
    after: bytes | None
    error: str = ""


def node_lines(model: bytes, limit: int) -> list[str]:
    """One line per node, `out = Op(in, ...)` (a domain other than ONNX's prefixed), at most `limit`."""
    graph = onnx.load_from_string(model).graph
    lines = [f"{', '.join(n.output)} = {n.domain + '.' if n.domain else ''}{n.op_type}({', '.join(n.input)})"
             for n in graph.node]
    return lines[:limit] + ([f"... {len(lines) - limit} more nodes"] if len(lines) > limit else [])


def op_counts(model: bytes) -> dict[str, int]:
    """How many nodes of each op type the model holds."""
    counts: dict[str, int] = {}
    for node in onnx.load_from_string(model).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def changed_ops(view: RewriteView) -> str:
    """'removed 2 Mul, 1 Tanh; added 1 FastGelu' (op types whose count the rewrite changed), '' when none did."""
    if view.after is None:
        return ""
    before, after = op_counts(view.before), op_counts(view.after)
    removed = [f"{before[op] - after.get(op, 0)} {op}" for op in sorted(before) if before[op] > after.get(op, 0)]
    added = [f"{after[op] - before.get(op, 0)} {op}" for op in sorted(after) if after[op] > before.get(op, 0)]
    parts = ([f"removed {', '.join(removed)}"] if removed else []) + ([f"added {', '.join(added)}"] if added else [])
    return "; ".join(parts)
