"""Where the source's own answer is unreliable, a target that differs from it is not filed: each case is a real graph
through a real converter, beside a real wrong value of the same shape that is still filed."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

from fuzzer.check.judge import judge_model
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.result import CheckOptions, CheckResult, Expected
from fuzzer.check.source import expect
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import Source, Steps
from fuzzer.converters.tf2onnx_exporter import Tf2Onnx, Tf2OnnxOptions
from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from generators.materialize import materialize
from generators.values import LARGE_MAGNITUDE, extreme_values
from oracles.verdict import Symptom

FAST = CheckOptions(rerun=False, locate=False, culprit=False)


class PlantedMulAsAdd(Tf2Onnx):
    """tf2onnx with a planted fault: the ONNX model it writes adds where the graph multiplies."""

    name = "planted-tf2onnx-mul-as-add"

    def export_model(self, model: Any, graph: Graph, options: Tf2OnnxOptions) -> onnx.ModelProto:
        proto = super().export_model(model, graph, options)
        for node in proto.graph.node:
            if node.op_type == "Mul":
                node.op_type = "Add"
        return proto


def _binary(op: str, dtype: DType, shape: tuple[int, ...] = (4,)) -> Graph:
    b = GraphBuilder()
    x, y = b.input(shape, dtype), b.input(shape, dtype)
    return b.build((b.op(op, (x, y), shape, dtype),))


def _expected(graph: Graph, inputs: tuple[list, ...]) -> Expected:
    """The source of `graph` on exactly these inputs (no input search)."""
    dtypes = [graph.types[n].dtype.torch for n in graph.inputs]
    tensors = tuple(torch.tensor(v, dtype=d) for v, d in zip(inputs, dtypes, strict=True))
    expected = expect(Source(graph, materialize(graph, 0), tensors), {})
    assert isinstance(expected, Expected)
    return expected


def _check(graph: Graph, inputs: tuple[list, ...], converter: Any, options: dict[str, Any] | None = None
           ) -> CheckResult:
    """`graph` on exactly these inputs under `converter`."""
    return check_prepared(_expected(graph, inputs), converter, options, FAST)


def _plus_one(model: onnx.ModelProto) -> None:
    """The model's only output with 1 added (of its own dtype): a real wrong value everywhere."""
    out = model.graph.output[0]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(out.type.tensor_type.elem_type)
    model.graph.initializer.append(numpy_helper.from_array(np.array(1, dtype), "planted_one"))
    for node in model.graph.node:
        node.output[:] = [f"{o}_before_plus_one" if o == out.name else o for o in node.output]
    model.graph.node.append(helper.make_node("Add", [f"{out.name}_before_plus_one", "planted_one"], [out.name]))


# float64 subnormals times 1e300: TensorFlow (eager and its float64 twin alike) reads them as zero; ONNX Runtime and
# torch give the IEEE products 1e-10 and -4e-20, far beyond float64's tolerance of 0.
SUBNORMAL_PRODUCTS = ([1e-310, 2.0, 3.0, -4e-320], [1e300, 1.0, 1.0, 1e300])


def _tf2onnx() -> Tf2Onnx:
    ok, reason = CONVERTERS["tf2onnx"].availability()
    if not ok:
        pytest.skip(reason)
    return CONVERTERS["tf2onnx"]


@pytest.mark.slow
def test_tensorflows_flushed_subnormals_do_not_blame_an_ieee_target() -> None:
    result = _check(_binary("mul", DType.FLOAT64), SUBNORMAL_PRODUCTS, _tf2onnx())
    assert result.target is not None and result.target.baseline is not None
    assert result.target.baseline[0].tolist() == [0.0, 2.0, 3.0, 0.0]  # what TensorFlow computed
    assert (result.verdict.symptom, result.verdict.labels) == (Symptom.PASS, ("not-blamed:denormals-flushed",))


@pytest.mark.slow
def test_a_wrong_value_on_subnormal_inputs_is_still_filed() -> None:
    _tf2onnx()
    result = _check(_binary("mul", DType.FLOAT64), SUBNORMAL_PRODUCTS, PlantedMulAsAdd())
    assert (result.verdict.symptom, result.verdict.diverging_op) == (Symptom.WRONG_VALUES, "mul")
    assert result.target is not None
    np.testing.assert_array_equal(result.target.outputs[0], np.array([1e300, 3.0, 4.0, 1e300]))


# int64 products of rows: the first row overflows (2**31 * 2**31 * 3, drawn from the `special` strategy's int64
# extremes), which torch wraps to -2**62 and ONNX Runtime's ReduceProd saturates to 2**63 - 1; the second does not.
def _row_products() -> Graph:
    b = GraphBuilder()
    x = b.input((2, 4), DType.INT64)
    return b.build((b.op("prod", (x,), (2,), DType.INT64, dim=1, keepdim=False),))


ROWS = ([[2**31, 2**31, 3, 1], [1, 2, 3, 4]],)


def test_an_integer_overflow_the_runtimes_resolve_differently_is_not_filed() -> None:
    result = _check(_row_products(), ROWS, CONVERTERS["torch-onnx-script"], {"opset": 17})
    assert result.target is not None and result.expected is not None
    assert result.expected.eager[0].tolist() == [-(2**62), 24]  # torch wraps
    assert result.target.outputs[0].tolist() == [2**63 - 1, 24]  # ONNX Runtime saturates
    assert (result.verdict.symptom, result.verdict.labels) == (Symptom.PASS, ("not-blamed:integer-overflow",))


def test_a_wrong_integer_beside_an_overflow_is_still_filed() -> None:
    expected = _expected(_row_products(), ROWS)
    model = export_script(expected.source, ScriptOptions(opset=17), Steps())
    _plus_one(model)
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert (verdict.symptom, verdict.diverging_op, verdict.diverging_dtype) == (Symptom.WRONG_VALUES, "prod", "int64")


# softplus(x, beta=10) of a row holding 8.5e37, the `special` strategy's float32 extreme (finfo.max / 4): torch returns
# x past its threshold, the TorchScript exporter's Softplus(10 * x) / 10 overflows to inf there.
def _softplus() -> Graph:
    b = GraphBuilder()
    x = b.input((2, 4))
    return b.build((b.op("softplus", (x,), (2, 4), beta=10.0, threshold=20.0),))


SOFTPLUS_ROWS = ([[8.5e37, 1.0, 2.0, -3.0], [1.0, 2.0, 3.0, 4.0]],)


def test_the_special_strategy_draws_float_extremes_whose_square_overflows() -> None:
    limit = float(torch.finfo(torch.float32).max) ** 0.5
    assert max(extreme_values(DType.FLOAT32)) > limit > LARGE_MAGNITUDE[DType.FLOAT32]


def test_an_overflow_at_an_extreme_input_is_not_filed() -> None:
    result = _check(_softplus(), SOFTPLUS_ROWS, CONVERTERS["torch-onnx-script"], {"opset": 17})
    assert result.target is not None and result.expected is not None
    assert np.isinf(result.target.outputs[0][0, 0]) and np.isfinite(result.expected.eager[0]).all()
    assert (result.verdict.symptom, result.verdict.labels) == (Symptom.PASS, ("not-blamed:extreme-input-overflow",))


def test_a_wrong_value_beside_an_extreme_input_is_still_filed() -> None:
    expected = _expected(_softplus(), SOFTPLUS_ROWS)
    model = export_script(expected.source, ScriptOptions(opset=17), Steps())
    _plus_one(model)
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert (verdict.symptom, verdict.diverging_op) == (Symptom.WRONG_VALUES, "softplus")
