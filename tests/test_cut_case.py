"""A finding of an ONNX tool in a zoo model reduced to a case folder of at most 10 ONNX nodes whose repro.py runs
alone: a planted fault deep in a transformer block (BERT's last feed-forward GELU) is located, cut out with the
source's values at its boundary as inputs, and written with the usual upstream repro.py."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fuzzer.campaign.db import DB_NAME
from fuzzer.campaign.zoo_unit import EVIDENCE_DIR, reducible_findings, zoo_entries, zoo_entry_for
from fuzzer.commands.reduce import reduce_zoo
from fuzzer.converters import CONVERTERS, DEFAULT_REGISTRY, ConverterRegistry, Role
from fuzzer.converters.describe import Snippet
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.modelcheck.cut import MAX_CUT_NODES, cut_model, growing, tool_on
from fuzzer.modelcheck.cut_case import reduce_tool_finding
from fuzzer.modelcheck.locate import intermediate_values
from fuzzer.triage.zoo_models import zoo_exports
from generators.zoo.registry import ZOO

ROOT = Path(__file__).resolve().parents[1]
# The planted fault, as the tool's snippet writes it in repro.py too: the model's last Erf computes tanh.
LAST_ERF = ("for node in [n for n in model.graph.node if n.op_type == 'Erf'][-1:]:", "    node.op_type = 'Tanh'")


@dataclass(frozen=True)
class LastErfOptions(UpstreamOptions):
    """The upstream and its opset: the planted tool has no options of its own."""


class LastErfTool(OnnxPassConverter[LastErfOptions]):
    """A planted ONNX tool: the model's last Erf (in a transformer, its deepest block's GELU) becomes a Tanh."""

    name = "planted-last-erf"
    role = Role.ONNX_TOOL
    framework = "onnx"
    runtime = "onnxruntime"
    libraries = ("onnx", "onnxruntime")
    distributions = ("onnx", "onnxruntime")
    options_type = LastErfOptions

    def snippet(self, options: LastErfOptions) -> Snippet:
        return Snippet((), LAST_ERF)

    def transform(self, model: onnx.ModelProto, options: LastErfOptions) -> onnx.ModelProto:
        for node in [n for n in model.graph.node if n.op_type == "Erf"][-1:]:
            node.op_type = "Tanh"
        return model


REGISTRY = ConverterRegistry([*CONVERTERS.values(), LastErfTool()])


def _chain() -> onnx.ModelProto:
    """x -> Relu -> Div(c) -> Erf -> Add(c) -> y, c a Constant node."""
    c = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [], [2.0]))
    nodes = [c, helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Div", ["r", "c"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]), helper.make_node("Add", ["e", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_a_cut_takes_the_sources_values_at_its_boundary_and_constants_as_initializers() -> None:
    model = _chain()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    values = {"x": x, **intermediate_values(model, ["r", "d", "e", "y"], {"x": x})}
    assert list(growing(model, 3)) == [[3], [3, 2], [3, 2, 4], [3, 2, 4, 1]]  # Erf, its Div, its Add, the Relu
    cut = cut_model(model, [2, 3], values)
    assert [n.op_type for n in cut.graph.node] == ["Div", "Erf"]
    assert [i.name for i in cut.graph.input] == ["r"] and [t.name for t in cut.graph.initializer] == ["c"]
    assert [o.name for o in cut.graph.output] == ["e"]
    verdict = tool_on(cut, (values["r"],), LastErfTool(), "cut").verdict
    assert (verdict.symptom.json_name, verdict.is_bug) == ("wrong_values", True)


@pytest.mark.slow
def test_a_planted_fault_deep_in_a_transformer_block_is_reduced_to_a_case_whose_repro_runs_alone(
        tmp_path: Path) -> None:
    export = next(e for e in zoo_exports(tmp_path / "cache", [ZOO["bert"]], CONVERTERS)
                  if e.exporter == "torch-onnx-dynamo")
    assert export.path is not None
    model = onnx.load(str(export.path))
    zoo = ZOO["bert"].build(0)
    feeds = {spec.name: x for spec, x in zip(ZOO["bert"].inputs, zoo.inputs)}
    erfs = [n for n in model.graph.node if n.op_type == "Erf"]
    assert len(erfs) >= 2  # one GELU per block: the fault is in the last one, not the first
    folder = reduce_tool_finding(model, feeds, LastErfTool(), {}, "wrong_values-planted-last-erf-bert", "zoo:bert", 0,
                                 tmp_path / "cases")
    assert folder is not None and folder.name == "wrong_values-planted-last-erf-bert-reduced"
    upstream = onnx.load(str(folder / "upstream.onnx"))
    assert 1 <= len(upstream.graph.node) <= MAX_CUT_NODES
    assert [n.op_type for n in upstream.graph.node].count("Erf") == 1
    record = json.loads((folder / "case.json").read_text())
    assert record["reduction"]["cut_from_node"] == (erfs[-1].name or erfs[-1].output[0])  # the deepest GELU's Erf
    assert (record["verdict"]["symptom"], record["verdict"]["diverging_op"]) == ("wrong_values", "Erf")
    alone = tmp_path / "alone"
    shutil.copytree(folder, alone)
    boot = (f"import sys, runpy; sys.path.append({sysconfig.get_paths()['purelib']!r}); "
            "runpy.run_path('repro.py', run_name='__main__')")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", boot], cwd=alone, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "torch" not in done.stdout.split("\n", 1)[0]


@pytest.mark.slow
def test_a_campaigns_zoo_finding_of_an_onnx_tool_is_reduced_by_its_reducer(tmp_path: Path) -> None:
    out = tmp_path / "zoo"
    seed = next(s for s in range(1000) if zoo_entry_for(s, zoo_entries()).name == "bert")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(ROOT), str(ROOT / "tests"))))
    done = subprocess.run([sys.executable, "-m", "fuzzer", "fuzz", "--source", "zoo", "--tests", "1", "--workers", "1",
                           "--seed", str(seed), "--converters", LastErfTool.name, "--registry",
                           "test_cut_case:REGISTRY", "--out", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reduction: 1 new cases minimized, 0 failed" in done.stdout
    (evidence,) = (out / EVIDENCE_DIR).iterdir()
    reduced = evidence / f"{evidence.name}-reduced"
    assert [n.op_type for n in onnx.load(str(reduced / "upstream.onnx")).graph.node] == ["Erf"]
    conn = sqlite3.connect(out / DB_NAME)
    assert conn.execute("SELECT case_dir FROM bugs").fetchall() == [(f"{EVIDENCE_DIR}/{evidence.name}",)]
    assert "planted-last-erf: `Erf` gives wrong values (float32)" in done.stdout  # titled as the reduced case was filed


def test_a_zoo_finding_of_an_exporter_or_an_unknown_entry_is_not_reduced_and_says_why(tmp_path: Path) -> None:
    record = {"entry": "bert", "framework": "pytorch", "seed": 0, "converter": "torch-onnx-script", "options": {},
              "verdict": {"signature": "sig"}}
    (tmp_path / "zoo.json").write_text(json.dumps(record))
    outcome = reduce_zoo(tmp_path, DEFAULT_REGISTRY)
    assert (outcome["ok"], outcome["error"]) == (False, f"{tmp_path.name}: torch-onnx-script is not an ONNX tool: a "
                                                        "zoo finding of an exporter is not reduced")
    (tmp_path / "zoo.json").write_text(json.dumps({**record, "converter": "ort-optimizer", "entry": "no-such"}))
    outcome = reduce_zoo(tmp_path, DEFAULT_REGISTRY)
    assert (outcome["ok"], outcome["error"]) == (False, f"{tmp_path.name}: no zoo entry 'no-such' here")


def test_a_resumed_campaign_requeues_the_zoo_findings_of_onnx_tools_only(tmp_path: Path) -> None:
    for name, converter in (("a", "ort-optimizer"), ("b", "torch-onnx-script"), ("c", "no-such-converter")):
        (tmp_path / EVIDENCE_DIR / name).mkdir(parents=True)
        (tmp_path / EVIDENCE_DIR / name / "zoo.json").write_text(json.dumps({"converter": converter}))
    (tmp_path / EVIDENCE_DIR / "d").mkdir()  # being written: no record yet
    assert reducible_findings(tmp_path, CONVERTERS) == [tmp_path / EVIDENCE_DIR / "a"]


class UnshownLastErf(LastErfTool):
    """The planted fault, but its repro.py call changes nothing: no cut's repro.py shows the failure. Counts its
    runs."""

    name = "planted-last-erf-unshown"

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def snippet(self, options: LastErfOptions) -> Snippet:
        return Snippet((), ("pass",))

    def transform(self, model: onnx.ModelProto, options: LastErfOptions) -> onnx.ModelProto:
        self.runs += 1
        return super().transform(model, options)


@pytest.mark.parametrize(("budget_s", "runs"), [(None, 5), (0.0, 2)])
def test_a_cut_no_repro_shows_keeps_the_smallest_marked_not_reproduced(tmp_path: Path, budget_s: float | None,
                                                                       runs: int) -> None:
    tool = UnshownLastErf()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    folder = reduce_tool_finding(_chain(), {"x": x}, tool, {}, "sig", "chain", 0, tmp_path, budget_s)
    assert folder is not None and tool.runs == runs  # the whole model, then each cut tried (one, on no budget)
    assert [n.op_type for n in onnx.load(str(folder / "upstream.onnx")).graph.node] == ["Erf"]
    assert json.loads((folder / "case.json").read_text())["replay"]["reproduces"] is False
