"""The first wrong node of a converted ONNX model: every value the source and the converted model both compute (by
name: the ONNX tools keep most value names) becomes an extra output of each, each side runs once, and the first
node of the converted model, in topological order, whose output is beyond the oracle's tolerance is named."""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from fuzzer.modelcheck.runs import judge, run_onnx

# The metadata key under which the dynamo exporter records the module path of a node.
NAME_SCOPES = "pkg.torch.onnx.name_scopes"


@dataclass(frozen=True)
class Location:
    """The first diverging node: its op type, name, the value it writes, the source layer where the model says,
    and the divergence (max abs) of its compared inputs before it and of its output after it."""

    op_type: str
    node: str
    output: str
    index: int  # its position in the converted model's node list
    layer: str
    before: float
    after: float
    compared: int  # how many shared values were compared

    def to_json(self) -> dict[str, object]:
        return {"op_type": self.op_type, "node": self.node, "output": self.output, "index": self.index,
                "layer": self.layer, "divergence_before": self.before, "divergence_after": self.after,
                "values_compared": self.compared}


def produced(model: onnx.ModelProto) -> dict[str, int]:
    """Each value a top-level node writes, with that node's index."""
    return {out: i for i, node in enumerate(model.graph.node) for out in node.output if out}


def shared_values(source: onnx.ModelProto, target: onnx.ModelProto) -> list[str]:
    """The values both models' nodes write, in the converted model's node order."""
    written = produced(source)
    return [out for node in target.graph.node for out in node.output if out and out in written]


def with_outputs(model: onnx.ModelProto, names: list[str]) -> bytes:
    """The model with `names` as its only outputs (ONNX Runtime infers their types) and only the nodes they need."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    needed, kept = set(names), []
    for node in reversed(copy.graph.node):
        if needed & set(node.output):
            kept.append(node)
            needed.update(node.input)
    del copy.graph.node[:]
    copy.graph.node.extend(reversed(kept))
    del copy.graph.output[:]
    copy.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    return copy.SerializeToString()


def intermediate_values(model: onnx.ModelProto, names: list[str], feeds: Mapping[str, np.ndarray]
                        ) -> dict[str, np.ndarray]:
    """The named values in one run of the model."""
    return dict(zip(names, run_onnx(with_outputs(model, names), feeds, names), strict=True))


def runnable_prefix(model: onnx.ModelProto, names: list[str], feeds: Mapping[str, np.ndarray]
                    ) -> tuple[dict[str, np.ndarray], int]:
    """The values of the longest prefix of `names` the model computes, and its length: all of them in one run where
    the model runs, else found by bisection (a model that fails at a node computes what comes before it)."""
    try:
        return intermediate_values(model, names, feeds), len(names)
    except Exception:  # the converted model fails somewhere: bisect for the values before the failure
        pass
    low, high = 0, len(names)  # names[:low] run; names[:high] do not
    while high - low > 1:
        mid = (low + high) // 2
        try:
            intermediate_values(model, names[:mid], feeds)
            low = mid
        except Exception:  # names[:mid] reach the failing node
            high = mid
    return (intermediate_values(model, names[:low], feeds) if low else {}), low


def source_layer(node: onnx.NodeProto) -> str:
    """The source layer the exporter recorded: the module holding the node in the dynamo exporter's name scopes (the
    last scope is the operator's own), else a TorchScript scope name ('/layer1/layer1.0/conv1/Conv': conv1), else
    the Keras layer in tf2onnx's '<model>/<layer>/<op>' ('model/block_1_expand/Conv2D': block_1_expand)."""
    meta = {p.key: p.value for p in node.metadata_props}
    scopes = meta.get(NAME_SCOPES, "")
    if scopes:
        try:
            named = [str(s) for s in ast.literal_eval(scopes) if s]
        except (ValueError, SyntaxError):
            named = []
        return named[-2] if len(named) >= 2 else ""
    parts = [p for p in node.name.split("/") if p]
    if node.name.startswith("/"):
        return parts[-2] if len(parts) >= 2 else ""
    return parts[-2] if len(parts) >= 3 else ""


def locate(source: bytes, target: bytes, feeds: Mapping[str, np.ndarray]) -> Location | None:
    """The first node of `target` whose output diverges from the same-named value of `source`, or that fails to run
    (its divergence after is inf); None when every shared value agrees."""
    src, tgt = onnx.load_from_string(source), onnx.load_from_string(target)
    names = shared_values(src, tgt)
    if not names:
        return None
    expected = intermediate_values(src, names, feeds)
    actual, ran = runnable_prefix(tgt, names, feeds)
    metrics = {n: judge(actual[n], expected[n]) for n in names[:ran]}
    where = produced(tgt)
    for name in names:
        metric = metrics.get(name)
        if metric is not None and metric.ok:
            continue
        node = tgt.graph.node[where[name]]
        before = max((metrics[i].max_abs for i in node.input if i in metrics), default=0.0)
        after = math.inf if metric is None else metric.max_abs
        return Location(node.op_type, node.name, name, where[name], source_layer(node), before, after, len(names))
    return None


def named_in_message(model: bytes, message: str) -> Location | None:
    """The node a converter's failure message names (onnx2tf quotes the ONNX node it was converting), the longest
    name found first; None where the message names none of the model's nodes."""
    proto = onnx.load_from_string(model)
    named = [(len(n.name), i) for i, n in enumerate(proto.graph.node) if len(n.name) > 3 and n.name in message]
    if not named:
        return None
    index = max(named)[1]
    node = proto.graph.node[index]
    return Location(node.op_type, node.name, node.output[0] if node.output else "", index, source_layer(node), 0.0,
                    math.inf, 0)
