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
from fuzzer.check.source import expect, overflow_masks
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


def _plus_one(model: onnx.ModelProto, output: int = 0) -> None:
    """The model's output number `output` with 1 added (of its own dtype): a real wrong value everywhere."""
    out = model.graph.output[output]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(out.type.tensor_type.elem_type)
    before, one = f"{out.name}_before_plus_one_{len(model.graph.node)}", f"planted_one_{len(model.graph.node)}"
    model.graph.initializer.append(numpy_helper.from_array(np.array(1, dtype), one))
    for node in model.graph.node:
        node.output[:] = [before if o == out.name else o for o in node.output]
    model.graph.node.append(helper.make_node("Add", [before, one], [out.name]))


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


# topk(tanh(x), 1) where torch's tanh and ONNX Runtime's round two neighbouring floats' images differently: torch
# orders them, ONNX Runtime ties them (and TopK names the lower index of a tie), so the two pick different indices of
# values an ulp apart. A far third value stays a wrong pick.
def _tanh_topk() -> Graph:
    from generators.ir import Node, TensorType, validate
    from generators.registry import REGISTRY

    three, one, index = TensorType((3,), DType.FLOAT32), TensorType((1,), DType.FLOAT32), TensorType((1,), DType.INT64)
    nodes = (Node("tanh", ("x",), ("t",), {}),
             Node("topk", ("t",), ("v", "i"), {"k": 1, "dim": 0, "largest": True, "sorted": True}))
    graph = Graph({"x": three}, {}, nodes, ("v", "i"), {"x": three, "t": three, "v": one, "i": index})
    validate(graph, REGISTRY)
    return graph


def _onnxruntime_tanh(x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    node = helper.make_node("Tanh", ["x"], ["y"])
    info = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph([node], "tanh", info[:1], info[1:]),
                              opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _ulp_flipped_pair() -> tuple[float, float]:
    """Neighbouring floats (lower, upper) whose tanh torch orders and ONNX Runtime does not."""
    upper = np.linspace(0.5, 1.5, 4001, dtype=np.float32)
    lower = np.nextafter(upper, np.float32(-np.inf))
    ordered = torch.tanh(torch.from_numpy(upper)).numpy() > torch.tanh(torch.from_numpy(lower)).numpy()
    flipped = np.flatnonzero(ordered & (_onnxruntime_tanh(upper) <= _onnxruntime_tanh(lower)))
    assert flipped.size, "no pair of neighbouring floats whose tanh torch and ONNX Runtime round apart"
    return float(lower[flipped[0]]), float(upper[flipped[0]])


def test_topk_indices_of_values_an_ulp_apart_are_not_filed() -> None:
    lower, upper = _ulp_flipped_pair()
    result = _check(_tanh_topk(), ([lower, upper, -1.0],), CONVERTERS["torch-onnx-script"], {"opset": 17})
    assert result.target is not None and result.expected is not None
    assert (result.expected.eager[1].tolist(), result.target.outputs[1].tolist()) == ([1], [0])
    assert (result.verdict.symptom, result.verdict.labels) == (Symptom.PASS, ())


def test_a_topk_index_at_a_far_value_is_still_filed() -> None:
    lower, upper = _ulp_flipped_pair()
    expected = _expected(_tanh_topk(), ([lower, upper, -1.0],))
    model = export_script(expected.source, ScriptOptions(opset=17), Steps())
    _plus_one(model, 1)  # index 0 becomes 1 (a near tie, right) or 1 becomes 2 (a far value, wrong)
    result = judge_model(model, expected, CONVERTERS["torch-onnx-script"])
    assert result.target is not None and result.target.outputs[1].tolist() == [1]
    assert result.verdict.symptom is Symptom.PASS
    _plus_one(model, 1)
    verdict = judge_model(model, expected, CONVERTERS["torch-onnx-script"]).verdict
    assert (verdict.symptom, verdict.diverging_op, verdict.diverging_dtype) == (Symptom.WRONG_VALUES, "topk", "int64")


def _left_shift() -> Graph:
    b = GraphBuilder()
    x = b.input((4,), DType.UINT8)
    return b.build((b.op("bitwise_left_shift", (x,), (4,), DType.UINT8, amount=1),))


def test_a_left_shift_that_carries_bits_out_is_an_integer_overflow_and_a_right_shift_never() -> None:
    expected = _expected(_left_shift(), ([254, 3, 128, 127],))
    assert expected.eager[0].tolist() == [252, 6, 0, 254]  # torch wraps
    (mask,) = overflow_masks(expected.source)
    assert mask is not None and mask.tolist() == [True, False, True, False]
    b = GraphBuilder()
    x = b.input((2,), DType.UINT8)
    right = _expected(b.build((b.op("bitwise_right_shift", (x,), (2,), DType.UINT8, amount=3),)), ([255, 7],))
    assert overflow_masks(right.source) == (None,)


def test_openvinos_saturated_left_shift_is_not_filed() -> None:
    """OpenVINO's CPU plugin gives 255 for uint8 254 << 1 where torch and ONNX Runtime wrap to 252: ONNX's BitShift
    does not say which, so the overflowed elements are not blamed."""
    converter = CONVERTERS["openvino-onnx"]
    ok, reason = converter.availability()
    if not ok:
        pytest.skip(reason)
    options = {"upstream": "onnx-native", "opset": 17, "precision": "f32"}
    result = _check(_left_shift(), ([254, 3, 128, 127],), converter, options)
    assert result.target is not None and result.target.outputs[0].tolist() == [255, 6, 255, 254]  # saturates
    assert (result.verdict.symptom, result.verdict.labels) == (Symptom.PASS, ("not-blamed:integer-overflow",))


def _int64_matmul() -> Graph:
    b = GraphBuilder()
    x, y = b.input((2, 2), DType.INT64), b.input((2, 2), DType.INT64)
    return b.build((b.op("matmul", (x, y), (2, 2), DType.INT64),))


def test_openvinos_int64_computed_in_int32_is_not_filed_where_values_leave_int32() -> None:
    """The CPU plugin computes int64 as int32 (its documented integer precision): a product beyond int32 comes back
    clamped, which is that limit, not filed; products inside int32 are judged as before, unlabelled."""
    converter = CONVERTERS["openvino-onnx"]
    ok, reason = converter.availability()
    if not ok:
        pytest.skip(reason)
    options = {"upstream": "onnx-native", "opset": 17, "precision": "f32"}
    beyond = _check(_int64_matmul(), ([[100000, 0], [0, 1]], [[100000, 0], [0, 2]]), converter, options)
    assert beyond.expected is not None and beyond.expected.eager[0].tolist() == [[10**10, 0], [0, 2]]
    assert beyond.target is not None and beyond.target.outputs[0].tolist() != [[10**10, 0], [0, 2]]
    assert (beyond.verdict.symptom, beyond.verdict.labels) == (Symptom.PASS, ("not-blamed:integer-overflow",))
    (mask,) = overflow_masks(beyond.expected.source, frozenset({"int64"}))
    assert mask is not None and mask.tolist() == [[True, False], [False, False]]
    assert overflow_masks(beyond.expected.source) == (None,)  # torch's int64 did not overflow
    within = _check(_int64_matmul(), ([[1000, 0], [0, 1]], [[1000, 0], [0, 2]]), converter, options)
    assert within.verdict.symptom is Symptom.PASS and within.verdict.labels == ()


def test_a_real_bug_downstream_of_a_left_shifts_overflow_is_still_filed() -> None:
    """The dynamo exporter reads the uint8 result of `x << 1` as int8 before a cumsum (252 comes back -4): a shift
    overflows on half of a uint8 input's values (200 << 1 here), so its mask must not excuse what follows it."""
    b = GraphBuilder()
    x = b.input((2, 2), DType.UINT8)
    shifted = b.op("bitwise_left_shift", (x,), (2, 2), DType.UINT8, amount=1)
    graph = b.build((b.op("cumsum", (shifted,), (2, 2), DType.INT64, dim=-2),))
    inputs = ([[126, 200], [1, 2]],)
    assert overflow_masks(_expected(graph, inputs).source) == (None,)
    result = _check(graph, inputs, CONVERTERS["torch-onnx-dynamo"], {"opset": 21})
    assert result.verdict.symptom is Symptom.WRONG_VALUES and result.verdict.diverging_dtype == "int64"
