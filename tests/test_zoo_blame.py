"""Whose bug a zoo finding is, decided at first sighting (fuzzer/diagnosis/zoo_blame.py), from real exports of the
zoo's GRU: a model that computes wrongly under onnx.reference too is the exporter's, a right model ONNX Runtime is
said to compute wrongly is the runtime kernels', a tool's model is judged against the one it received, and a crash
inside a converter is its own step's."""

from __future__ import annotations

from functools import cache

import numpy as np
import onnx
from onnx import helper

from fuzzer.cases.zoo_report import check_command, zoo_report, zoo_title
from fuzzer.check.zoo import ZooResult, prepare_zoo
from fuzzer.check.zoo_source import ZooSource
from fuzzer.converters import CONVERTERS
from fuzzer.diagnosis.blame import KERNEL_KEY
from fuzzer.diagnosis.zoo_blame import zoo_blame
from generators.zoo.registry import ZOO
from oracles.verdict import Stage, Symptom, Verdict

SCRIPT = CONVERTERS["torch-onnx-script"]
WRONG = Verdict(Symptom.WRONG_VALUES, Stage.RUNTIME_EXECUTION, "torch-onnx-script", signature="s",
                message="output steps of zoo model gru: values, max_abs=1")


@cache
def gru() -> tuple[ZooSource, bytes]:
    """The zoo's GRU at seed 3 and its TorchScript export (a right model)."""
    prepared = prepare_zoo(ZOO["gru"].build(3))
    return prepared, SCRIPT.convert(prepared.source, SCRIPT.options({})).model


def plus_one_on_first_output(model: bytes) -> bytes:
    """The model with 1 added to its first output: a planted wrong export every runtime computes alike."""
    proto = onnx.load_from_string(model)
    out = proto.graph.output[0].name
    for node in proto.graph.node:
        node.output[:] = [f"{o}_raw" if o == out else o for o in node.output]
        node.input[:] = [f"{i}_raw" if i == out else i for i in node.input]
    one = helper.make_tensor("planted_one", onnx.TensorProto.FLOAT, [], [1.0])
    proto.graph.initializer.append(one)
    proto.graph.node.append(helper.make_node("Add", [f"{out}_raw", "planted_one"], [out]))
    return proto.SerializeToString()


def test_a_wrong_export_that_onnx_reference_computes_alike_is_the_exporters() -> None:
    prepared, model = gru()
    blame = zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, WRONG, {}, plus_one_on_first_output(model)))
    assert (blame.component.key, blame.settled, blame.shared) == ("torch-onnx-script", True, False)
    assert blame.evidence[1] == "ONNX's checker and strict shape inference accept it"
    assert blame.evidence[2].startswith("onnx.reference on the exported model: it computes wrong outputs too (values")
    assert blame.evidence[-1] == "so the exported model itself computes the wrong outputs"


def test_a_right_export_that_ort_is_said_to_compute_wrongly_is_the_runtime_kernels() -> None:
    prepared, model = gru()
    blame = zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, WRONG, {}, model))
    assert (blame.component.project, blame.component.key, blame.settled, blame.shared) == (
        "ONNX Runtime", KERNEL_KEY, True, True)
    assert blame.component.name.startswith("a CPU kernel of one of the ")
    assert blame.component.name.endswith("operator types of zoo model `gru` (not located to one)")
    assert blame.evidence[2] == "onnx.reference on the exported model: it computes the right outputs (within tolerance)"


def test_an_onnx_tools_model_is_judged_against_the_model_it_received() -> None:
    prepared, model = gru()
    tool = CONVERTERS["onnxsim"]
    verdict = Verdict(Symptom.WRONG_VALUES, Stage.GRAPH_OPTIMIZATION, tool.name, signature="s", message="m")
    wrong = ZooResult("gru", tool.name, verdict, {}, plus_one_on_first_output(model), baseline=prepared.eager)
    blame = zoo_blame(prepared, tool, wrong)
    assert (blame.component.key, blame.settled) == ("onnxsim", True)
    assert blame.evidence[0].startswith("onnxsim's model computes outputs that differ from those of the model it "
                                        "received")
    assert blame.evidence[-1] == "so the tool's model itself computes otherwise"
    right = zoo_blame(prepared, tool, ZooResult("gru", tool.name, verdict, {}, model, baseline=prepared.eager))
    assert (right.component.key, right.shared) == (KERNEL_KEY, True)


def test_a_crash_inside_a_converter_is_its_own_and_a_model_without_a_target_model_stays_unsettled() -> None:
    prepared, _ = gru()
    crash = Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, SCRIPT.name, signature="s", message="ValueError: boom")
    blame = zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, crash, {}))
    assert (blame.component.key, blame.settled) == ("torch-onnx-script", True)
    assert blame.component.name == "TorchScript exporter: the symbolic function of an operator the error does not name"
    named = Verdict(Symptom.CRASH, Stage.NODE_CONVERSION, SCRIPT.name, signature="s",
                    message="ValueError: boom\n(failing node: op_type=Where)")
    assert zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, named, {})).component.name == (
        "TorchScript exporter: the symbolic function that emits ONNX `Where`")
    assert blame.evidence == (f"it fails inside the converter on zoo model `gru`, at node conversion: "
                              f"{blame.component.name}",)
    unexamined = zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, WRONG, {}))
    assert (unexamined.component.key, unexamined.settled) == ("torch-onnx-script", False)


def test_an_invalid_model_the_runtime_rejects_is_the_converters() -> None:
    prepared, model = gru()
    proto = onnx.load_from_string(model)
    proto.graph.node[0].input[0] = "nowhere"
    rejected = Verdict(Symptom.CRASH, Stage.RUNTIME_LOAD, SCRIPT.name, signature="s", message="Fail: nowhere")
    blame = zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, rejected, {}, proto.SerializeToString()))
    assert (blame.component.key, blame.settled) == ("torch-onnx-script", True)
    assert blame.evidence[-1] == "so the converter wrote a model ONNX's own checker rejects"


def test_the_report_titles_the_architecture_says_whose_bug_and_how_to_check_it_again() -> None:
    prepared, model = gru()
    blame = zoo_blame(prepared, SCRIPT, ZooResult("gru", SCRIPT.name, WRONG, {}, plus_one_on_first_output(model)))
    options = {"opset": 17, "upstream": "torch-onnx-dynamo"}
    command = check_command("gru", 3, "onnxsim", options)
    assert command == ("convsmith check --zoo gru --seed 3 --converters onnxsim --option opset=17 "
                       "--option 'upstream=\"torch-onnx-dynamo\"'")
    report = zoo_report("gru", 3, SCRIPT.name, {}, WRONG, blame)
    lines = report.splitlines()
    assert lines[0] == f"# {zoo_title('gru', SCRIPT.name, WRONG)}"
    assert lines[0] == "# torch.onnx.export (TorchScript): wrong values at runtime execution on zoo model `gru`"
    assert "## Whose bug" in lines and "## Check it again" in lines
    assert f"File with {blame.file_with()}." in lines
    assert "convsmith check --zoo gru --seed 3 --converters torch-onnx-script" in lines
    assert np.isfinite(prepared.eager[0]).all()
