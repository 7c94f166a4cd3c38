"""The impact of a root cause on real architectures: its case's ONNX pattern (operators, behaviour attributes,
dtypes, edges) matched exactly in the zoo's converted models, listed in root_cause.json, report.md and the page."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from fuzzer.converters import CONVERTERS
from fuzzer.triage.impact import Impact, ZooModels, case_model, group_impact, pattern_impact
from fuzzer.triage.impact_section import HEADING, add_impact_section, impact_section, with_impact_section
from fuzzer.triage.model import Finding, RootCauseGroup
from fuzzer.triage.pattern import index_model, occurs_in, pattern_of
from fuzzer.triage.rows import table_row
from fuzzer.triage.zoo_models import cache_key, zoo_exports
from generators.zoo.registry import ZOO
from oracles.rootcause import root_cause

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def _model(nodes: list[onnx.NodeProto], dtype: int = F32, inputs: tuple[str, ...] = ("x",),
           initializers: tuple[str, ...] = ()) -> onnx.ModelProto:
    """A model of `nodes` over float inputs and scalar initializers of `dtype`, its output the last node's."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, dtype, [2, 3]) for n in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], dtype, None)],
        [helper.make_tensor(n, dtype, [], [1.0]) for n in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _gelu(dtype: int = F32) -> onnx.ModelProto:
    """x * 0.5 * (1 + erf(x / sqrt 2)), as the torch exporters write exact GELU, behind a Relu."""
    return _model([helper.make_node("Relu", ["x"], ["m"]), helper.make_node("Div", ["m", "c"], ["d"]),
                   helper.make_node("Erf", ["d"], ["e"]), helper.make_node("Add", ["e", "c"], ["a"]),
                   helper.make_node("Mul", ["m", "a"], ["y"])], dtype, initializers=("c",))


DIV_ERF = _model([helper.make_node("Div", ["x", "c"], ["d"]), helper.make_node("Erf", ["d"], ["y"])],
                 initializers=("c",))


def test_a_pattern_matches_the_same_operators_dtypes_and_edges_only() -> None:
    gelu = index_model(_gelu())
    assert occurs_in(pattern_of(DIV_ERF), gelu)
    assert not occurs_in(pattern_of(DIV_ERF), index_model(_gelu(F16)))  # the dtype that triggers differs
    erf_of_x = _model([helper.make_node("Div", ["x", "c"], ["d"]), helper.make_node("Erf", ["x"], ["y"])],
                      initializers=("c",))
    assert not occurs_in(pattern_of(erf_of_x), gelu)  # Erf fed by the input, not by the Div: another edge
    assert pattern_of(DIV_ERF).describe() == "Div(float32, float32), Erf(float32)"


def test_behaviour_attributes_must_match_and_sizes_need_not() -> None:
    def softmax(axis: int, cast_to: int, kernel: int) -> onnx.ModelProto:
        return _model([helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[kernel]),
                       helper.make_node("Softmax", ["p"], ["s"], axis=axis),
                       helper.make_node("Cast", ["s"], ["y"], to=cast_to)])

    model = index_model(softmax(-1, F16, 2))
    assert occurs_in(pattern_of(softmax(-1, F16, 3)), model)  # a kernel size is a size
    assert not occurs_in(pattern_of(softmax(1, F16, 2)), model)
    assert not occurs_in(pattern_of(softmax(-1, TensorProto.DOUBLE, 2)), model)


def test_constants_and_identities_are_not_part_of_a_pattern() -> None:
    with_constant = _model([helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", F32, [], [2.0])),
                            helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Div", ["i", "c"], ["d"]),
                            helper.make_node("Erf", ["d"], ["y"])])
    pattern = pattern_of(with_constant)
    assert [n.op_type for n in pattern.nodes] == ["Div", "Erf"]
    assert occurs_in(pattern, index_model(_gelu()))


def test_the_report_section_replaces_itself_and_keeps_what_follows() -> None:
    impact = Impact("Div(float32, float32), Erf(float32)", "upstream.onnx", 2, {"bert": ("torch-onnx-dynamo",)}, 32)
    section = impact_section(impact, 3)
    assert section.splitlines()[:3] == [HEADING, "", "Found in a case of 3 operators; affects: bert (of 32 zoo "
                                                     "architectures)."]
    text = "# title\n\nbody\n\n## Versions\nv\n"
    once = with_impact_section(text, section)
    assert once == text + "\n" + section
    moved = with_impact_section("# t\n\n" + section + "\n## Versions\nv\n", impact_section(impact, 4))
    assert moved.count(HEADING) == 1 and "3 operators" not in moved and moved.endswith("## Versions\nv\n")
    assert with_impact_section(once, section) == once
    none = Impact("", "", 0, searched=32, note="no case folder: found in a zoo model")
    assert none.line() == "affects: not known (no case folder: found in a zoo model)"


def _group(case_dir: str, nodes: int) -> RootCauseGroup:
    finding = Finding("sig", "planted-erf", "graph_optimization", "crash", "RuntimeError: planted", "Erf",
                      ("div", "erf"), 0, 1, 0.0, case_dir, True, nodes)
    return RootCauseGroup(root_cause("planted-erf", "graph_optimization", "crash", "RuntimeError: planted", "Erf",
                                     ("div", "erf")), (finding,))


def planted_fault_fires(model: onnx.ModelProto) -> bool:
    """The planted fault: an ONNX tool that fails on an Erf whose input a Div computes in float32. Written apart
    from the matcher on purpose, as the tool under test would be."""
    inferred = onnx.shape_inference.infer_shapes(model)
    dtypes = {v.name: v.type.tensor_type.elem_type for v in (*inferred.graph.value_info, *inferred.graph.input)}
    made_by = {out: node.op_type for node in model.graph.node for out in node.output}
    return any(node.op_type == "Erf" and made_by.get(node.input[0]) == "Div" and dtypes.get(node.input[0]) == F32
               for node in model.graph.node)


SEARCHED = ("bert", "gru", "llama", "resnet", "vit")


@pytest.mark.slow
def test_a_planted_fault_in_one_operator_pattern_lists_exactly_the_zoo_models_it_hits(tmp_path: Path) -> None:
    case = tmp_path / "campaign" / "crash-planted-reduced"
    case.mkdir(parents=True)
    onnx.save(DIV_ERF, str(case / "upstream.onnx"))  # the reduced case: what the planted tool received
    (case / "report.md").write_text("# planted-erf: RuntimeError\n\nbody\n")
    exports = zoo_exports(tmp_path / "cache", [ZOO[name] for name in SEARCHED], CONVERTERS)
    assert {(e.entry, e.exporter) for e in exports} == {(n, x) for n in SEARCHED
                                                         for x in ("torch-onnx-dynamo", "torch-onnx-script")}
    zoo = ZooModels.load(exports)
    hit: dict[str, list[str]] = {}
    for e in exports:
        if e.path is not None and planted_fault_fires(onnx.load(str(e.path))):
            hit.setdefault(e.entry, []).append(e.exporter)
    impact = group_impact(_group(case.name, 2), tmp_path / "campaign", zoo)
    assert {k: list(v) for k, v in impact.affected.items()} == hit
    assert "bert" in hit and "gru" not in hit and "resnet" not in hit  # BERT's exact GELU; no Erf in the others
    assert impact.line().startswith(f"affects: {', '.join(sorted(hit))} (of {len(zoo.entries)} zoo architectures)")
    # The same operators in float16 occur in none of the float32 exports.
    assert pattern_impact(pattern_of(_model(list(DIV_ERF.graph.node), F16, initializers=("c",))), "x", zoo
                          ).affected == {}
    add_impact_section(case, impact, 2)
    assert impact.line() in (case / "report.md").read_text()
    row = table_row(_group(case.name, 2), False, 0.0, tmp_path / "campaign", tmp_path, impact)
    assert row.affects == impact.line().removeprefix("affects: ")
    again = zoo_exports(tmp_path / "cache", [ZOO[name] for name in SEARCHED], CONVERTERS, progress=pytest.fail)
    assert again == exports  # made once: the second call reads the cache
    assert (tmp_path / "cache" / cache_key(CONVERTERS)).is_dir()


def test_a_case_without_an_onnx_model_gives_its_graph_written_to_onnx(tmp_path: Path) -> None:
    assert case_model(tmp_path) is None  # no model and no case.json
    onnx.save(DIV_ERF, str(tmp_path / "model.onnx"))
    model, origin = case_model(tmp_path) or (None, "")
    assert origin == "model.onnx" and model is not None and len(model.graph.node) == 2


def test_the_root_causes_operator_alone_is_searched_beside_the_whole_pattern() -> None:
    zoo = ZooModels((("gelu-net", "torch-onnx-dynamo", index_model(_gelu())),
                     ("half-net", "torch-onnx-dynamo", index_model(_gelu(F16)))), ("gelu-net", "half-net"))
    erf_of_x = _model([helper.make_node("Sin", ["x"], ["s"]), helper.make_node("Erf", ["s"], ["y"])])
    impact = pattern_impact(pattern_of(erf_of_x), "upstream.onnx", zoo, "Erf")
    assert (dict(impact.affected), impact.operator, dict(impact.operator_affected)) == (
        {}, "Erf(float32)", {"gelu-net": ("torch-onnx-dynamo",)})
    assert impact.line() == "affects: none (of 2 zoo architectures); its Erf(float32) alone: gelu-net"
    assert pattern_impact(pattern_of(DIV_ERF), "x", zoo, "Erf").line() == (
        "affects: gelu-net (of 2 zoo architectures); its Erf(float32) alone: gelu-net")
    assert pattern_impact(pattern_of(DIV_ERF), "x", zoo, "Cos").operator == ""
