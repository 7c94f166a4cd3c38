"""Suggested fixes: a fault planted in a real TorchScript export is repaired by exactly the edit that undoes it;
the corpus's divergences get the edits their conversion faults map to; a case that agrees gets none."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest
from hand_graphs import conv_relu
from onnx import numpy_helper

from fuzzer.cases.case import CaseData, case_from_check
from fuzzer.cases.folder import read_case
from fuzzer.cases.replay import case_expected
from fuzzer.check.judge import judge_model
from fuzzer.converters import CONVERTERS
from fuzzer.diagnosis.repair import suggest_fix
from generators.builder import GraphBuilder
from generators.ir import Graph
from oracles.verdict import Symptom

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _avg_pool() -> Graph:
    g = GraphBuilder()
    x = g.input((1, 2, 5, 5))
    g.op("avg_pool2d", (x,), (1, 2, 5, 5), kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), ceil_mode=False,
         count_include_pad=True, divisor_override=None)
    return g.build()


def _planted(case: CaseData, model: onnx.ModelProto) -> CaseData:
    """The case with a faulty model in place of its export, and the verdict the oracle gives that model."""
    data = model.SerializeToString()
    verdict = judge_model(data, case_expected(case), CONVERTERS[case.converter]).verdict
    assert verdict.symptom is Symptom.WRONG_VALUES
    return dataclasses.replace(case, model=data, verdict=verdict)


def test_a_dropped_attribute_is_set_back() -> None:
    case = case_from_check(_avg_pool(), 0, "torch-onnx-script", None)
    model = onnx.load_from_string(case.model)
    (pool,) = model.graph.node
    next(a for a in pool.attribute if a.name == "count_include_pad").i = 0
    fix = suggest_fix(_planted(case, model))
    assert (fix.kind, fix.edit) == ("attribute", "set AveragePool.count_include_pad = 1 on node /AveragePool")
    assert fix.description == ("the source's `avg_pool2d` has count_include_pad=True, which the converted "
                               "AveragePool does not carry over")
    assert fix.tries == 2  # ceil_mode = 1 (from count_include_pad=True) first, which changes nothing here


def test_a_scaled_weight_is_replaced_by_the_sources() -> None:
    case = case_from_check(conv_relu(), 0, "torch-onnx-script", None)
    model = onnx.load_from_string(case.model)
    (init,) = model.graph.initializer
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 2, init.name))
    fix = suggest_fix(_planted(case, model))
    assert (fix.kind, fix.edit, fix.tries) == ("weight", "replace initializer w0 by the source's weight w0", 1)


@pytest.mark.parametrize(("case_id", "edit"), [
    ("wrong_values-torch-onnx-script-node_conversion-floor_divide-int32-d79aa6c72e56-reduced",
     "compute /Div (integer Div) in floating point and Floor it"),
    ("wrong_values-torch-onnx-script-node_conversion-roll-bool-88b2dcbb0a34-reduced",
     "replace the integer constant 78 by 78 mod 5 = 3 (2 places)"),
    ("wrong_shape-torch-onnx-script-node_conversion-std-float16-217a5fd9e06e-reduced",
     "set ReduceMean.keepdims = 1 on node /ReduceMean_1"),
    ("wrong_dtype-torch-onnx-script-node_conversion-var-float64-83280070463f-reduced", "cast output t3 to double"),
    ("wrong_values-torch-onnx-script-node_conversion-log10-float64-fb6603c834e6-reduced",
     "store ln(10) = 2.302585092994046 exactly: the model holds its float32 rounding 2.3025851249694824"),
    # Floor happens to turn softplus(1) = 1.31 into the expected 1; fresh inputs reject it. The real fault (the
    # threshold ONNX's Softplus lacks) is no small edit.
    ("wrong_values-torch-onnx-script-node_conversion-softplus-float32-3fad068e80f1-reduced", None),
    ("wrong_values-torch-onnx-script-node_conversion-topk-float32-914ef788a216-reduced", None),  # agrees now
])
def test_corpus_divergences_get_the_edit_of_their_fault(case_id: str, edit: str | None) -> None:
    fix = suggest_fix(read_case(CORPUS / case_id))
    assert (fix.edit if fix else None) == edit


def test_a_crash_gets_no_suggested_fix() -> None:
    case = read_case(CORPUS / "crash-torch-onnx-script-validation-InferenceError-360d9b7d9a59-reduced")
    assert suggest_fix(case) is None
