"""Values a tool renamed, named back: locating compares the values both models write by name, so a converted model
whose tool renamed most of its values has little to compare. Its node sequence is aligned with the source's by op
type (difflib, as a diff aligns lines: a node dropped or added is a gap, a node of another kind in the place of one
is a pair), and each aligned node's outputs take the source node's names; a name that would clash with one the
model keeps is left as it was."""

from __future__ import annotations

import difflib

import onnx

from fuzzer.modelcheck.edits import copied
from fuzzer.modelcheck.locate import shared_values

# Below this share of its node outputs found in the source by name, a converted model is taken as renamed.
RENAMED = 0.5


def renames(source: onnx.ModelProto, target: onnx.ModelProto) -> dict[str, str]:
    """The target's value names to give the source's, where the two node sequences align by op type."""
    kept = {v.name for v in target.graph.input} | {v.name for v in target.graph.output} | \
        {t.name for t in target.graph.initializer}
    matcher = difflib.SequenceMatcher(a=[n.op_type for n in source.graph.node],
                                      b=[n.op_type for n in target.graph.node], autojunk=False)
    table: dict[str, str] = {}
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and a1 - a0 == b1 - b0):  # a node of another kind in its place
            for theirs, ours in zip(source.graph.node[a0:a1], target.graph.node[b0:b1]):
                for mine, name in zip(ours.output, theirs.output):
                    if mine and name and mine not in kept and name != mine:
                        table[mine] = name
    taken = {o for n in target.graph.node for o in n.output if o not in table} | kept
    return {mine: name for mine, name in table.items() if name not in taken}


def named_back(source: onnx.ModelProto, target: onnx.ModelProto) -> onnx.ModelProto | None:
    """The target with its renamed values named after the source's; None where it keeps most names already."""
    outputs = [o for n in target.graph.node for o in n.output if o]
    if not outputs or len(shared_values(source, target)) >= RENAMED * len(outputs):
        return None
    table = renames(source, target)
    if not table:
        return None
    out = copied(target)
    for node in out.graph.node:
        node.input[:] = [table.get(i, i) for i in node.input]
        node.output[:] = [table.get(o, o) for o in node.output]
    return out
