"""`convsmith check MODEL --out DIR` files each failing conversion: an ONNX tool's failure on a real PyTorch model
(a planted fault through the registry, on the dynamo exporter's model) is cut to a case folder whose repro.py shows it
alone; an exporter's failure gets no case and says why; and a failure whose root-cause key a corpus case has is
reported as that known root cause, any other as not known."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper

from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.cases.known_causes import KnownCause
from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.converters.describe import Snippet
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.modelcheck.known_cause import match_known
from fuzzer.support.errors import Exit
from oracles.rootcause import UNLOCALIZED, RootCause

# The planted fault, as the tool's snippet writes it in repro.py too: the model's Relu computes a sigmoid.
RELU_TO_SIGMOID = ("for node in model.graph.node:", "    if node.op_type == 'Relu':",
                   "        node.op_type = 'Sigmoid'")


class ReluToSigmoid(OnnxPassConverter[UpstreamOptions]):
    """A planted ONNX tool: every Relu becomes a Sigmoid."""

    name = "planted-tool"
    libraries = ("onnx", "onnxruntime")
    distributions = ("onnx", "onnxruntime")
    options_type = UpstreamOptions

    def snippet(self, options: UpstreamOptions) -> Snippet:
        return Snippet((), RELU_TO_SIGMOID)

    def transform(self, model: onnx.ModelProto, options: UpstreamOptions) -> onnx.ModelProto:
        for node in model.graph.node:
            if node.op_type == "Relu":
                node.op_type = "Sigmoid"
        return model


class PerturbConv(ReluToSigmoid):
    """Another planted fault of a tool of the same name: the first convolution's weight moved."""

    def transform(self, model: onnx.ModelProto, options: UpstreamOptions) -> onnx.ModelProto:
        conv = next(n for n in model.graph.node if n.op_type == "Conv")
        tensor = next(t for t in model.graph.initializer if t.name == conv.input[1])
        array = numpy_helper.to_array(tensor).copy()
        array.flat[0] += 0.5
        tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
        return model


REGISTRY = ConverterRegistry([*CONVERTERS.values(), ReluToSigmoid()])
OTHER = ConverterRegistry([*CONVERTERS.values(), PerturbConv()])
MODEL = "test_modelcheck:small_net"  # Conv2d, ReLU, Conv2d


def _check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["check", MODEL, *argv])
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the planted tool's check, with no corpus case known."""
    out = tmp_path_factory.mktemp("checked") / "out"
    code = main(["check", MODEL, "--registry", "test_modelcheck_filing:REGISTRY", "--converters", "planted-tool",
                 "--corpus", str(out.parent / "no-corpus"), "--out", str(out)])
    assert code == Exit.BUG
    return out


def _case(out: Path) -> Path:
    (folder,) = [p for p in (out / "planted-tool").iterdir() if p.is_dir()]
    return folder


def test_an_onnx_tools_failure_is_cut_to_a_case_whose_repro_shows_it_alone(checked: Path, tmp_path: Path) -> None:
    folder = _case(checked)
    upstream = onnx.load(str(folder / "upstream.onnx"))
    assert [n.op_type for n in upstream.graph.node] == ["Relu"]  # the cut: the one node the fault is in
    record = json.loads((folder / "case.json").read_text())
    assert (record["verdict"]["symptom"], record["verdict"]["diverging_op"]) == ("wrong_values", "Relu")
    assert record["reduction"]["onnx_nodes"] == 1 and record["replay"]["reproduces"] is True
    # Its owner is named as it is filed: the planted tool's model computes otherwise under onnx.reference too.
    blame = record["blame"]
    assert (blame["component"]["key"], blame["settled"], blame["shared"]) == ("planted-tool", True, False)
    assert blame["evidence"][-1] == "so the tool's model itself computes otherwise"
    # A cut has no PyTorch module: its report says where its expected values come from.
    assert "\nExpected (the model the tool received, cut the same way, run on ONNX Runtime): " in (
        folder / "report.md").read_text()
    alone = tmp_path / "alone"
    shutil.copytree(folder, alone)
    done = subprocess.run([sys.executable, "-I", "repro.py"], cwd=alone, capture_output=True, text=True, timeout=300)
    assert done.returncode == Exit.BUG, done.stdout + done.stderr
    (verdict,) = json.loads((checked / "verdicts.json").read_text())["converters"]
    assert verdict["case"]["folder"] == f"planted-tool/{folder.name}"
    assert verdict["case"]["note"] == "reduced to 1 ONNX nodes; its repro.py shows the failure alone"
    assert f"- upstream case: planted-tool/{folder.name} (reduced to 1 ONNX nodes" in (checked / "summary.md"
                                                                                        ).read_text()


def test_an_exporters_failure_gets_no_case_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, printed = _check(["--registry", "test_modelcheck:EXPORTERS", "--corpus", str(tmp_path / "none"), "--out",
                            str(out)], capsys)
    assert code == Exit.BUG
    assert sorted(p.name for p in (out / "perturbing-exporter").iterdir()) == [
        "converted.onnx", "located.dot", "repaired.onnx"]  # no case folder
    (verdict,) = json.loads((out / "verdicts.json").read_text())["converters"]
    note = ("not reduced: perturbing-exporter starts from the source model, which no ONNX cut can stand for "
            "(located at source layer inner.0); shown again by `convsmith check test_modelcheck:small_net --seed 0 "
            "--converters perturbing-exporter`")
    assert verdict["case"] == {"folder": None, "note": note, "seconds": 0.0}
    assert f"upstream case: none ({note})" in printed
    assert verdict["root_cause"]["known"] is None


def test_a_failure_with_a_corpus_cases_root_cause_is_known_and_another_is_not(
        checked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    case = shutil.copytree(_case(checked), corpus / _case(checked).name)
    title = (case / "report.md").read_text().splitlines()[0][2:]
    code, printed = _check(["--registry", "test_modelcheck_filing:REGISTRY", "--converters", "planted-tool",
                            "--corpus", str(corpus)], capsys)  # no --out: the key from the verdict, not a case
    assert code == Exit.BUG
    assert f"  this is the known root cause {title} (corpus case {case})\n" in printed
    code, printed = _check(["--registry", "test_modelcheck_filing:OTHER", "--converters", "planted-tool",
                            "--corpus", str(corpus)], capsys)
    assert code == Exit.BUG
    assert "  not a known root cause (key rc-planted_tool-wrong_values-Conv-43b8bb44bb)\n" in printed


def test_a_failure_with_a_campaigns_root_cause_is_known_as_that_campaigns(
        checked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "campaign"
    case = shutil.copytree(_case(checked), campaign / _case(checked).name)
    record = json.loads((case / "case.json").read_text())
    db = CampaignDB(campaign / DB_NAME, create=True)
    db.adopt_bug(record["signature"], "wrong_values", "graph_optimization", "planted-tool", 0, case.name)
    db.close()
    title = (case / "report.md").read_text().splitlines()[0][2:]
    code, printed = _check(["--registry", "test_modelcheck_filing:REGISTRY", "--converters", "planted-tool",
                            "--corpus", str(tmp_path / "no-corpus"), "--campaign", str(campaign)], capsys)
    assert code == Exit.BUG
    assert f"  this is the known root cause {title} (campaign case {case})\n" in printed


def test_a_campaign_that_is_none_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", MODEL, "--campaign", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == Exit.USAGE and len(err.splitlines()) == 1



def test_a_wrong_model_with_no_operator_isolated_is_never_matched_though_its_key_is_known() -> None:
    cause = RootCause("planted-tool", "graph_optimization", "wrong_values", UNLOCALIZED, "")
    known = {cause.key: KnownCause(cause.key, "a title", Path("corpus/x"))}
    match = match_known(cause, known)
    assert match.known is None
    assert match.line() == f"not a known root cause (key {cause.key}; no wrong node isolated, so not matched)"
    crash = RootCause("planted-tool", "node_conversion", "crash", UNLOCALIZED, "ValueError: bad")
    assert match_known(crash, {crash.key: known[cause.key]}).known is not None  # a crash's error class names it
