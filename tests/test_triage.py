"""Root causes, not signatures: the three ways one defect split into many collapse into one root cause, two
defects on one operator stay two, and a campaign resumed after promotion reports its finding as known."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fuzzer.campaign.db import DB_NAME, CampaignDB, open_campaign
from fuzzer.cases.case import case_id
from fuzzer.cases.known_causes import report_title
from fuzzer.commands.main import main
from fuzzer.diagnosis.blame import KERNEL_KEY
from fuzzer.triage.findings import finding_from_folder, load_findings, zoo_owner, zoo_title
from fuzzer.triage.grouping import group
from fuzzer.triage.model import Finding
from fuzzer.triage.view import Headline, triage
from oracles.rootcause import ANY_OPERATOR, CauseClass, error_class

SCHEMA = ("onnx.onnx_cpp2py_export.shape_inference.InferenceError: [ShapeInferenceError] (op_type:{op}, node name: "
          "{node}): {arg} typestr: T, has unsupported type: tensor({dtype})")


def finding(signature: str, converter: str = "torch-onnx-script", stage: str = "validation",
            symptom: str = "invalid_model", message: str = "", diverging_op: str | None = None,
            ops: tuple[str, ...] = ("add",), seed: int = 0, upstream: str | None = None) -> Finding:
    return Finding(signature, converter, stage, symptom, message, diverging_op, ops, seed, 1, float(seed),
                   upstream=upstream, nodes=len(ops), options={"upstream": upstream} if upstream else {})


def test_a_type_below_the_opset_that_allows_it_is_one_root_cause_titled_by_a_real_operator() -> None:
    """The exporter emits bfloat16 to operators whose schema takes it only at a later opset: one fix (a higher opset
    or a cast), whatever the operator; the title still names one of them."""
    below = " [ONNX's {op} takes tensor(bfloat16) from opset 22]"
    found = [finding("a", message=SCHEMA.format(op="Cos", node="/Cos", arg="input", dtype="bfloat16")
                     + below.format(op="Cos"), ops=("cos",)),
             finding("b", message=SCHEMA.format(op="Elu", node="/Elu_3", arg="X", dtype="bfloat16")
                     + below.format(op="Elu"), ops=("elu",)),
             finding("c", message=SCHEMA.format(op="Conv", node="/Conv", arg="X", dtype="bfloat16")
                     + below.format(op="Conv"), ops=("conv2d", "relu"))]
    groups = group(found, {})
    assert len(groups) == 1 and groups[0].cause.operator == ANY_OPERATOR and groups[0].hits == 3
    assert groups[0].cause.cause is CauseClass.INCOMPATIBILITY  # the type is allowed, at another opset
    assert groups[0].cause.error_class == "InferenceError: an operator gets bfloat16 below the opset that allows it"
    assert groups[0].cause.title().startswith(f"torch-onnx-script: {groups[0].cause.shown_operator} invalid model")
    assert groups[0].cause.shown_operator in ("cos", "elu", "conv2d")


def test_a_type_no_opset_allows_is_keyed_by_operator_and_dtype() -> None:
    """A type no opset of the operator takes is that operator's lowering to fix: one root cause per operator and
    dtype, not one bucket for every schema error."""
    none = " [no opset of ONNX's {op} takes tensor({dtype})]"
    found = [finding("a", message=SCHEMA.format(op="Atan", node="/Atan", arg="input", dtype="int32")
                     + none.format(op="Atan", dtype="int32"), ops=("atan",)),
             finding("b", message=SCHEMA.format(op="Atan", node="/Atan_2", arg="input", dtype="int32")
                     + none.format(op="Atan", dtype="int32"), ops=("atan", "add")),
             finding("c", message=SCHEMA.format(op="Cos", node="/Cos", arg="input", dtype="int32")
                     + none.format(op="Cos", dtype="int32"), ops=("cos",)),
             finding("d", message=SCHEMA.format(op="Cos", node="/Cos", arg="input", dtype="int64")
                     + none.format(op="Cos", dtype="int64"), ops=("cos",))]
    groups = group(found, {})
    assert sorted((g.cause.operator, g.hits) for g in groups) == [("atan", 2), ("cos", 1), ("cos", 1)]
    assert all(g.cause.error_class.endswith("which no opset of its ONNX schema allows") for g in groups)


def test_a_tool_that_only_received_the_exporters_fault_is_filed_under_the_exporter() -> None:
    """tile's wrong declared rank from the exporter, seen again by onnxsim and the ORT optimizer on that graph: their
    blame names the exporter (the model they received fails ONNX's checker), so they join its root cause."""
    exporter = finding("exp", symptom="wrong_shape", stage="node_conversion", diverging_op="tile",
                       ops=("tile", "add"), seed=5)
    onnxsim = replace(finding("sim", converter="onnxsim", message="onnx.onnx_cpp2py_export.shape_inference."
                              "InferenceError: [ShapeInferenceError] (op_type:Tile, node name: /Tile): Inferred shape "
                              "and existing shape differ in rank: (3) vs (2)", ops=("tile", "add"), seed=5,
                              upstream="torch-onnx-script"), owner="torch-onnx-script")
    ort = replace(finding("ort", converter="ort-optimizer", stage="graph_optimization", symptom="crash",
                          message="onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : "
                                  "Node (/Tile) Op (Tile) [ShapeInferenceError] rank mismatch", ops=("tile", "add"),
                          seed=5, upstream="torch-onnx-script"), owner="torch-onnx-script")
    groups = group([exporter, onnxsim, ort], {(5, "torch-onnx-script"): "exp"})
    by_converter = {g.cause.converter: sorted(f.signature for f in g.findings) for g in groups}
    assert by_converter == {"torch-onnx-script": ["exp", "ort", "sim"]}


def test_a_tools_own_failure_stays_its_own_though_the_graph_hit_an_exporter_bug() -> None:
    """The exporter's known bug on the same graph moves nothing where the tool's blame is its own (the model it
    received was valid): the campaign reviewed filed four such tool crashes under the exporter."""
    exporter = finding("exp", symptom="wrong_dtype", stage="node_conversion", diverging_op="amin",
                       ops=("amin", "matmul"), seed=5)
    onnx2tf = finding("tf", converter="onnx2tf", stage="node_conversion", symptom="crash",
                      message="builtins.IndexError: tuple index out of range", ops=("amin", "matmul"), seed=5,
                      upstream="torch-onnx-script")
    groups = group([exporter, onnx2tf], {(5, "torch-onnx-script"): "exp"})
    assert {g.cause.converter: [f.signature for f in g.findings] for g in groups} == {
        "torch-onnx-script": ["exp"], "onnx2tf": ["tf"]}


def test_the_localized_operator_not_its_consumers_names_the_root_cause() -> None:
    """A std_mean keepdim bug seen through add and softplus: located to std_mean, filed once."""
    found = [finding(s, symptom="wrong_shape", stage="node_conversion", diverging_op="std_mean", ops=ops)
             for s, ops in (("a", ("std_mean", "add")), ("b", ("std_mean", "softplus", "mul")))]
    groups = group(found, {})
    assert len(groups) == 1 and groups[0].cause.operator == "std_mean"


def test_onnx2tf_crashes_are_filed_under_the_operator_tensorflow_or_onnx2tf_names() -> None:
    """TFLite's MLIR names the TensorFlow op ('tf.Acos'), onnx2tf the module it lacks (onnx2tf.ops.BitwiseOr)."""
    mlir = finding("a", converter="onnx2tf", stage="node_conversion", symptom="crash", ops=("acos", "relu"),
                   message="ConverterError: error: 'tf.Acos' op is neither a custom op nor a flex op")
    module = finding("b", converter="onnx2tf", stage="node_conversion", symptom="crash", ops=("bitwise_or", "neg"),
                     message="builtins.ModuleNotFoundError: No module named 'onnx2tf.ops.BitwiseOr'")
    assert [g.cause.operator for g in group([mlir, module], {})] == ["acos", "bitwise_or"]


def test_two_defects_on_one_operator_stay_two() -> None:
    crash = finding("a", stage="node_conversion", symptom="crash", ops=("roll",),
                    message="builtins.AssertionError: len(shifts)=1 != len(dims)=0")
    other_crash = finding("b", stage="node_conversion", symptom="crash", ops=("roll",),
                          message="torch.onnx.errors.SymbolicValueError: Unsupported: ONNX export of roll with bool")
    wrong = finding("c", stage="node_conversion", symptom="wrong_values", diverging_op="roll", ops=("roll",))
    assert len(group([crash, other_crash, wrong], {})) == 3
    again = finding("d", stage="node_conversion", symptom="crash", ops=("roll",),
                    message="builtins.AssertionError: len(shifts)=2 != len(dims)=1")
    assert len(group([crash, again], {})) == 1  # numbers are evidence


def test_error_class_keeps_words_and_drops_names_numbers_and_dtypes() -> None:
    assert error_class("builtins.AssertionError: len(shifts)=1 != len(dims)=0") == \
        "AssertionError: len(shifts)=<n> != len(dims)=<n>"
    assert error_class(SCHEMA.format(op="Cos", node="/Cos", arg="input", dtype="bfloat16")) == \
        "InferenceError: an operator gets bfloat16, which its ONNX schema does not allow"
    # A Keras layer's wrapper says which TensorFlow op raised; the reason on its next line is the class.
    keras = 'builtins.ValueError: Exception encountered when calling layer "tf.pad_3" (type TFOpLambda).\n\n{}\n'
    assert error_class(keras.format("Received `mode` = WRAP")) == \
        'ValueError: Exception encountered when calling layer "tf.pad" (type TFOpLambda). Received `mode` = WRAP'
    assert error_class(keras.format("Paddings must be non-negative")) != error_class(keras.format("mode = WRAP"))


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real campaign (6 graphs of 3 operators) that files bugs: its converter, planted through the registry,
    crashes on every graph with a message naming the graph's first operator."""
    out = tmp_path_factory.mktemp("triage") / "c"
    argv = ["fuzz", "--tests", "6", "--seed", "0", "--workers", "1", "--registry", "test_isolation:QUICK_REGISTRY",
            "--converters", "faulty-crash", "--nodes", "3", "--no-reduce", "--out", str(out), "--corpus",
            str(out.parent / "no-corpus")]
    assert main(argv) == 0
    return out


@pytest.mark.slow
def test_a_campaign_resumed_after_promotion_reports_its_finding_as_known(campaign: Path, tmp_path: Path) -> None:
    db = open_campaign(campaign)
    before = triage(campaign, db, tmp_path / "corpus")
    db.close()
    assert before.groups and not any(g.known for g in before.groups)
    case = campaign / before.groups[0].representative.case_dir
    # Promoted as the known bug it is (a replay runs the installed registry, which has no planted converter).
    assert main(["promote", str(case), "--corpus", str(tmp_path / "corpus"), "--expect", "bug", "--no-verify"]) == 0
    # Not reduced on resume either: a reduced case's root cause names the operator its crash is down to, and the
    # promoted case, unreduced, names none.
    resume = ["fuzz", "--resume", str(campaign), "--tests", "8", "--no-reduce", "--corpus", str(tmp_path / "corpus")]
    assert main(resume) == 0
    db = open_campaign(campaign)
    after = triage(campaign, db, tmp_path / "corpus")
    db.close()
    assert [g.key for g in after.groups if g.known] == [before.groups[0].key]
    assert after.headline.known_root_causes == 1 and after.headline.tests == 8
    assert (campaign / "root-causes" / before.groups[0].key / "root_cause.json").is_file()


def test_the_headline_counts_reduced_cases_left_to_polish_beside_the_unreduced() -> None:
    counts = dict(tests=10, tests_run=8, signatures=4, root_causes=3, new_root_causes=3, known_root_causes=0,
                  new_last_hour=3, unreduced=1, own_errors=0, unreduced_cases=1)
    assert "; 1 root causes and 1 cases unreduced (2 more not polished); 10 tests" in \
        Headline(**counts, unpolished_cases=2).line()
    assert "; 1 root causes and 1 cases unreduced; 10 tests" in Headline(**counts).line()


def test_a_root_cause_title_quotes_its_representatives_error_not_the_normalized_class() -> None:
    """The key's class has placeholders; the title a person scans quotes the smallest case's own words."""
    crash = finding("a", converter="onnx2tf", stage="node_conversion", symptom="crash",
                    message="builtins.ValueError: 4 is not in list", ops=("matmul",))
    (only,) = group([crash], {})
    assert only.cause.error_class == "ValueError: <n> is not in list"
    assert only.title == "onnx2tf: matmul crash at node conversion: ValueError: 4 is not in list"
    assert only.to_json()["title"] == only.title


def test_dropped_outputs_are_one_root_cause_titled_as_such_not_a_wrong_shape() -> None:
    """A model that returns fewer outputs than the graph has is not a shape bug of whichever operator came first."""
    found = [finding(s, converter="onnxslim", stage="graph_optimization", symptom="wrong_shape",
                     message=f"target has {n} outputs, the graph {n + 2}", ops=ops)
             for s, n, ops in (("a", 1, ("sin", "add")), ("b", 2, ("relu", "mul", "neg")))]
    (only,) = group(found, {})
    assert only.title == "onnxslim: returns fewer outputs than the graph has (at graph optimization)"
    assert only.hits == 2


def test_a_root_cause_is_titled_as_its_representative_was_filed_where_it_names_one_operator() -> None:
    """The report.md title is in the owner's vocabulary (ONNX operators for an ONNX tool): the page says the same."""
    filed = "onnx2tf: `Where` (from `where`) gives wrong values (uint8)"
    wrong = replace(finding("a", converter="onnx2tf", stage="node_conversion", symptom="wrong_values",
                                        message="output t1: off", ops=("where", "sin")), diverging_op="where",
                                filed_title=filed)
    (only,) = group([wrong], {})
    assert only.title == filed
    # Several findings under one shared cause keep the cause's own title, which names every operator met.
    found = [replace(finding(s, converter="onnxslim", stage="graph_optimization", symptom="wrong_shape",
                                         message="target has 1 outputs, the graph 3", ops=("sin",)), filed_title=filed)
             for s in ("b", "c")]
    (shared,) = group(found, {})
    assert shared.title == "onnxslim: returns fewer outputs than the graph has (at graph optimization)"


def test_a_zoo_finding_is_titled_by_the_architecture_it_showed_in(tmp_path: Path) -> None:
    """A zoo finding is an evidence folder, not a case: its title names the zoo model, not 'an operator not
    isolated'."""
    folder = tmp_path / "zoo" / "crash-x"
    folder.mkdir(parents=True)
    (folder / "zoo.json").write_text('{"entry": "t5", "converter": "torch-onnx-dynamo"}')
    base = finding("crash-x", converter="torch-onnx-dynamo", stage="node_conversion", symptom="crash",
                   message="builtins.ValueError: Cannot view a tensor", ops=())
    title = zoo_title(folder, base)
    assert title == ("torch.onnx.export (dynamo): crash at node conversion on zoo model `t5`: "
                     "ValueError: Cannot view a tensor")
    (only,) = group([replace(base, case_dir="zoo/crash-x", filed_title=title)], {})
    assert only.title == title
    assert zoo_title(tmp_path, base) == ""  # no zoo record: no title of its own


def test_a_zoo_finding_with_a_report_is_filed_under_its_title_and_a_shared_blames_owner(tmp_path: Path) -> None:
    folder = tmp_path / "zoo" / "values-x"
    folder.mkdir(parents=True)
    blame = {"component": {"project": "ONNX Runtime", "name": "a CPU kernel", "tracker": "", "key": KERNEL_KEY},
             "evidence": [], "settled": True, "shared": True}
    (folder / "zoo.json").write_text(json.dumps({"entry": "gru", "converter": "torch-onnx-script", "blame": blame}))
    (folder / "report.md").write_text("# torch.onnx.export (TorchScript): wrong values on zoo model `gru`\n")
    assert (report_title(folder), zoo_owner(folder)) == (
        "torch.onnx.export (TorchScript): wrong values on zoo model `gru`", KERNEL_KEY)
    (folder / "zoo.json").write_text(json.dumps({"entry": "gru", "blame": {**blame, "shared": False}}))
    assert zoo_owner(folder) is None  # the converter's own component: its root cause stays the converter's


def test_a_graph_case_represents_a_root_cause_before_a_zoo_finding_which_keeps_its_folder(tmp_path: Path) -> None:
    """A zoo finding's folder is its case_dir (so it is known as one), and an unreduced graph case of the same root
    cause represents it: a whole architecture is not the smallest case, though it counts no graph operators."""
    folder = tmp_path / "zoo" / "crash-z"
    folder.mkdir(parents=True)
    (folder / "zoo.json").write_text('{"entry": "t5", "converter": "onnx-version-converter"}')
    message = "onnx.onnx_cpp2py_export.checker.ValidationError: Unrecognized attribute: noop_with_empty_axes"
    zoo = finding_from_folder(tmp_path, finding("crash-z", converter="onnx-version-converter", message=message, ops=(),
                                       seed=0), "zoo/crash-z")
    assert (zoo.case_dir, zoo.from_zoo, zoo.nodes) == ("zoo/crash-z", True, 0)
    graph = replace(finding("crash-g", converter="onnx-version-converter", message=message, ops=("amax", "sin"),
                            seed=1), case_dir="crash-g")
    (only,) = group([zoo, graph], {})
    assert only.representative.signature == "crash-g"


def test_an_exporters_zoo_finding_is_read_from_its_evidence_folder_though_its_row_names_none(tmp_path: Path) -> None:
    """The bug row of an exporter's zoo finding names no folder (the campaign's reducer takes the row's folder, and
    an exporter's zoo finding is not reduced): its title and blame are still read from zoo/<case id>/."""
    signature = "crash-torch-onnx-dynamo-node_conversion-ConversionError-481f37a9f515"
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.adopt_bug(signature, "crash", "node_conversion", "torch-onnx-dynamo", 7, None)  # type: ignore[arg-type]
    folder = tmp_path / "zoo" / case_id(signature)
    folder.mkdir(parents=True)
    (folder / "zoo.json").write_text('{"entry": "t5", "converter": "torch-onnx-dynamo"}')
    (folder / "report.md").write_text("# torch.onnx.export (dynamo): crash at node conversion on zoo model `t5`\n")
    (found,) = load_findings(tmp_path, db)
    db.close()
    assert (found.case_dir, found.filed_title) == (f"zoo/{case_id(signature)}", "torch.onnx.export (dynamo): crash "
                                                   "at node conversion on zoo model `t5`")
