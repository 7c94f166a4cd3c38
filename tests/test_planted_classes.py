"""Planted rewrites wrong only in one edge-case class, found by a short campaign and named with that class: each tool
removes Neg(Neg(x)), as onnxoptimizer's eliminations would; one gets it wrong only on int64 (it keeps one Neg), the
other only where the inner Neg's output has a second consumer (it rewires that consumer to x too). Their coverage,
read from the campaign's database, shows the bugs on the (rewrite, class) pair alone. Planted through the registry."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from fuzzer.campaign.class_coverage import class_counts
from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import Campaign
from fuzzer.campaign.rewrites import coverage
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions

REWRITE = "eliminate_double_neg"


def _double_negs(graph: onnx.GraphProto) -> list[tuple[onnx.NodeProto, onnx.NodeProto]]:
    """(inner, outer) Neg pairs: the outer reads the inner's output."""
    made = {node.output[0]: node for node in graph.node if node.op_type == "Neg"}
    return [(made[node.input[0]], node) for node in graph.node if node.op_type == "Neg" and node.input[0] in made]


def _dtype(model: onnx.ModelProto, name: str) -> int:
    typed = onnx.shape_inference.infer_shapes(model)
    values = {v.name: v for v in (*typed.graph.input, *typed.graph.value_info, *typed.graph.output)}
    return values[name].type.tensor_type.elem_type if name in values else 0


class _DoubleNeg(OnnxPassConverter[UpstreamOptions]):
    libraries = ("onnxruntime",)
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = UpstreamOptions

    def rewrite_names(self) -> tuple[str, ...]:
        return (REWRITE,)

    def fired(self, model: onnx.ModelProto, options: UpstreamOptions) -> tuple[str, ...]:
        return (REWRITE,) if _double_negs(model.graph) else ()

    def transform(self, model: onnx.ModelProto, options: UpstreamOptions) -> onnx.ModelProto:
        made = onnx.ModelProto()
        made.CopyFrom(model)
        pair = next(iter(_double_negs(made.graph)), None)
        if pair is not None:
            self.rewrite(made, *pair)
        return made

    def rewrite(self, model: onnx.ModelProto, inner: onnx.NodeProto, outer: onnx.NodeProto) -> None:
        """The outer Neg's readers read x; the outer Neg goes (the inner stays for its other readers)."""
        self._rewire(model.graph, outer.output[0], inner.input[0])
        model.graph.node.remove(outer)

    @staticmethod
    def _rewire(graph: onnx.GraphProto, old: str, new: str, outputs: bool = True) -> None:
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name == old:
                    node.input[i] = new
        for value in graph.output if outputs else ():
            if value.name == old:  # a graph output keeps its name: an Identity carries x to it
                graph.node.append(onnx.helper.make_node("Identity", [new], [old]))


class WrongOnInt64(_DoubleNeg):
    """Right on float32; on int64 it keeps the outer Neg's sign."""

    name = "planted-neg-int64"

    def rewrite(self, model: onnx.ModelProto, inner: onnx.NodeProto, outer: onnx.NodeProto) -> None:
        if _dtype(model, inner.input[0]) == onnx.TensorProto.INT64:
            self._rewire(model.graph, outer.output[0], inner.output[0])
            model.graph.node.remove(outer)
            return
        super().rewrite(model, inner, outer)


class WrongOnSecondConsumer(_DoubleNeg):
    """Right where the inner Neg feeds the outer alone; else its other readers read x too."""

    name = "planted-neg-consumer"

    def rewrite(self, model: onnx.ModelProto, inner: onnx.NodeProto, outer: onnx.NodeProto) -> None:
        super().rewrite(model, inner, outer)
        self._rewire(model.graph, inner.output[0], inner.input[0], outputs=False)


REGISTRY = ConverterRegistry([WrongOnInt64(), WrongOnSecondConsumer()])
TOOLS = tuple(REGISTRY)


@pytest.mark.slow
def test_a_short_campaign_names_each_planted_bug_with_its_class(tmp_path: Path) -> None:
    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=3, nodes=5,
                          include_ops=("neg", "add", "sin"), dtypes=("float32", "int64"), check={"input_budget_s": 0.2},
                          converters=TOOLS, registry=f"{__name__}:REGISTRY", demote_known=False)
    spec = CampaignSpec(0, TOOLS, worker, 80)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1).run() == "finished"
    counts = class_counts(db.conn)
    int64 = counts["planted-neg-int64"]
    assert int64[REWRITE, "int64"][1] > 0 and int64[REWRITE, "float32"][0] > 0
    assert int64[REWRITE, "float32"][1] <= int64[REWRITE, "int64"][1]  # a float32 bug only beside an int64 match
    bugs = db.conn.execute("SELECT t.idx, t.converter FROM tests AS t WHERE t.is_bug = 1 AND t.converter IN (?, ?)",
                           TOOLS).fetchall()
    labels = {(idx, converter): {row[0] for row in db.conn.execute(
        "SELECT class FROM rewrite_classes WHERE idx = ? AND converter = ?", (idx, converter))}
        for idx, converter in bugs}
    assert bugs and all("int64" in found for (_, c), found in labels.items() if c == "planted-neg-int64")
    assert all("second_consumer" in found for (_, c), found in labels.items() if c == "planted-neg-consumer")
    consumer = counts["planted-neg-consumer"]
    assert consumer[REWRITE, "second_consumer"][1] > 0
    rows = {row.converter: row for row in coverage(db, REGISTRY)}
    fired = {(r["rewrite"], r["class"]): r["bugs"] for r in rows["planted-neg-consumer"].pairs.to_json()["fired"]}
    assert fired[REWRITE, "second_consumer"] > 0
    # Each bug is named with its class: every test that hit it fired the rewrite on that class (the int64 one's
    # never on float32).
    named = {name: rows[name].pairs.bug_classes for name in TOOLS}
    assert named["planted-neg-int64"] and all((REWRITE, "int64") in pairs and (REWRITE, "float32") not in pairs
                                              for pairs in named["planted-neg-int64"].values())
    assert named["planted-neg-consumer"] and all((REWRITE, "second_consumer") in pairs
                                                 for pairs in named["planted-neg-consumer"].values())
    db.close()
