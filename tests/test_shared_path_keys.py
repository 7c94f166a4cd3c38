"""Root causes keyed as a fix follows them: a crash one shared code path raises on many ONNX operators is one root
cause whose title lists the operators; the node a converter failed on is named in its own words. The messages are
the ones onnx2tf, TensorFlow and ONNX's version converter print."""

from __future__ import annotations

from fuzzer.triage.grouping import group
from fuzzer.triage.model import Finding
from oracles.rootcause import ANY_OPERATOR, error_class, root_cause

WRAPPER = 'ValueError: Exception encountered when calling layer "tf.math.{}" (type TFOpLambda).\n\n'
BROADCAST = ("Dimensions must be equal, but are 7 and 6 for '{{{{node tf.math.{0}/{1}}}}} = {1}[T=DT_FLOAT]"
             "(Placeholder, Placeholder_1)' with input shapes: [4,1,7,2], [6,1].")


def broadcast_crash(layer: str, tf_op: str, onnx_op: str) -> str:
    return WRAPPER.format(layer) + BROADCAST.format(layer, tf_op) + f"\n(failing node: op_type={onnx_op})"


def crash(message: str, graph_ops: tuple[str, ...], seed: int) -> Finding:
    return Finding(f"sig-{seed}", "onnx2tf", "node_conversion", "crash", message, None, graph_ops, seed, 1,
                   float(seed))


def test_onnx2tf_broadcast_failures_of_three_operators_are_one_root_cause_titled_with_all_three() -> None:
    findings = [crash(broadcast_crash("add", "AddV2", "Add"), ("add", "relu"), 1),
                crash(broadcast_crash("multiply_4", "Mul", "Mul"), ("mul",), 2),
                crash(broadcast_crash("less_equal", "LessEqual", "LessOrEqual"), ("le", "abs"), 3)]
    groups = group(findings, {})
    assert len(groups) == 1
    assert groups[0].cause.operator == ANY_OPERATOR
    assert groups[0].title == ("onnx2tf: Add, Mul, LessOrEqual crash at node conversion: ValueError: a broadcasting "
                               "elementwise operator's operands reach TensorFlow in shapes that do not broadcast")


def test_a_matmul_contraction_mismatch_is_not_the_broadcast_root_cause() -> None:
    message = ('ValueError: Exception encountered when calling layer "tf.linalg.matmul_1" (type TFOpLambda).\n\n'
               "Dimensions must be equal, but are 4 and 3 for '{{node tf.linalg.matmul_1/MatMul}} = BatchMatMulV2"
               "[T=DT_FLOAT, adj_x=false, adj_y=false](Placeholder, Placeholder_1)' with input shapes: [2,4], [3,5]."
               "\n(failing node: op_type=MatMul)")
    cause = root_cause("onnx2tf", "node_conversion", "crash", message, None, ("matmul",))
    assert cause.operator == "MatMul"
    assert "broadcast" not in cause.error_class


def test_the_failing_node_is_named_in_the_converters_words_whatever_the_graph_calls_it() -> None:
    message = ('ValueError: Exception encountered when calling layer "tf.transpose_1" (type TFOpLambda).\n\n'
               "Dimension must be 4 but is 3 for '{{node tf.transpose_1/transpose}}'\n(failing node: op_type=Sub)")
    with_sub = root_cause("onnx2tf", "node_conversion", "crash", message, None, ("sub", "exp"))
    with_rsub = root_cause("onnx2tf", "node_conversion", "crash", message, None, ("rsub", "exp"))
    assert with_sub.operator == with_rsub.operator == "Sub"
    assert with_sub.key == with_rsub.key


def test_an_operator_the_error_names_comes_before_the_node_the_library_was_on() -> None:
    message = ("ConverterError: Could not translate MLIR: error: 'tf.Acos' op is neither a custom op nor a flex op"
               "\n(failing node: op_type=Concat)")
    assert root_cause("onnx2tf", "node_conversion", "crash", message, None, ("acos", "cat")).operator == "acos"


def test_the_version_converters_reduce_attribute_left_behind_is_one_root_cause_across_reduce_operators() -> None:
    causes = {root_cause("onnx-version-converter", "validation", "invalid_model",
                         f"onnx.onnx_cpp2py_export.checker.ValidationError: Unrecognized attribute: "
                         f"noop_with_empty_axes for operator {op}\n\n==> Context: Bad node spec", None, ops)
              for op, ops in (("ReduceMax", ("max",)), ("ReduceMean", ("pattern_rms_norm",)),
                              ("ReduceL1", ("norm", "abs")))}
    assert len(causes) == 1
    (cause,) = causes
    assert cause.error_class == ("ValidationError: a Reduce operator keeps its attribute noop_with_empty_axes in an "
                                 "opset that does not have it")


DYNAMO_WRAPPER = (
    "torch.onnx._internal.exporter._errors.ConversionError: Failed to convert the exported program to an ONNX model. "
    "\x1b[96mThis is step 3/3\x1b[0m of exporting the model to ONNX. Next steps:\n- If there is a missing ONNX "
    "function, implement it and register it to the registry.\n\n## Exception summary\n\n<class 'ValueError'>: "
    "Required parameter 'dim' is not provided. Signature: pkg.onnxscript.torch_lib::aten_amax(self, dim, keepdim)\n"
    "⬆️\n<class 'torch.onnx._internal.exporter._errors.ConversionError'>: Error when translating node %amax : "
    "[num_users=1] = call_function[target=torch.ops.aten.amax.default](args = (%var,), kwargs = {}).\n")


def test_the_dynamo_exporters_conversion_error_is_keyed_and_titled_by_the_exception_that_explains_it() -> None:
    cause = root_cause("torch-onnx-dynamo", "node_conversion", "crash", DYNAMO_WRAPPER, None, ("var", "amax", "relu"))
    assert cause.operator == "amax"
    assert cause.error_class.startswith("ValueError: Required parameter 'dim' is not provided.")
    (found,) = group([Finding("s", "torch-onnx-dynamo", "node_conversion", "crash", DYNAMO_WRAPPER, None,
                              ("var", "amax", "relu"), 1, 1, 1.0)], {})
    assert "\x1b" not in found.title and "Required parameter 'dim'" in found.title


def test_a_model_input_declared_in_another_dtype_is_one_root_cause_named_by_the_two_dtypes() -> None:
    message = ("onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT"
               " : Unexpected input data type. Actual: (tensor(bfloat16)) , expected: (tensor(float16))")
    causes = {root_cause("tf2onnx", "runtime_execution", "crash", message, None, ops)
              for ops in (("sub", "flatten"), ("exp",))}
    assert [c.error_class for c in causes] == ["InvalidArgument: the model takes a bfloat16 input of the source as "
                                               "float16"]


def test_an_operator_ort_names_in_a_type_error_is_the_one_filed() -> None:
    message = ("onnxruntime.capi.onnxruntime_pybind11_state.InvalidGraph: [ONNXRuntimeError] : 10 : INVALID_GRAPH : "
               "This is an invalid model. Type Error: Type 'tensor(double)' of input parameter (in4) of operator "
               "(SkipLayerNormalization) in node (SkipLayerNorm_0) is invalid.")
    cause = root_cause("ort-transformers", "runtime_load", "invalid_model", message, None, ("mish", "min", "add"))
    assert cause.operator == "SkipLayerNormalization"
    other_input = message.replace("(in4)", "(in2)").replace("SkipLayerNorm_0", "SkipLayerNorm_3")
    assert root_cause("ort-transformers", "runtime_load", "invalid_model", other_input, None, ("gelu",)) == cause
    assert cause.error_class == "InvalidGraph: an operator gets double, which its ONNX schema does not allow"


def test_a_graph_output_a_tool_left_without_its_node_is_one_root_cause() -> None:
    message = ("onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/"
               "onnxruntime/core/graph/graph.cc:1617 void onnxruntime::Graph::InitializeStateFromModelFileGraphProto()"
               " This is an invalid model. Graph output ({}) does not exist in the graph.")
    causes = {root_cause("ort-transformers", "runtime_load", "invalid_model", message.format(name), None, ops)
              for name, ops in (("t1", ("isfinite", "reshape", "acos")), ("t4", ("relu",)))}
    assert [c.error_class for c in causes] == ["Fail: the model lists a graph output that no node computes any more"]


OPENVINO_REPORT = (
    "openvino._pyopenvino.OpConversionFailure: Check 'false' failed at src/frontends/common_translators/src/"
    "unconverted_ops_report.cpp:151:\nFrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted. "
    "Failed operations detailed log:\n-- aten::avg_pool3d with a message:\nException happened during conversion of "
    "operation aten::avg_pool3d with schema aten::avg_pool3d(Tensor self)\nCheck '(context.input_is_none(6))' failed "
    "at src/frontends/pytorch/src/op/avg_poolnd.cpp:74:\nFrontEnd API failed with OpConversionFailure:\n[PyTorch "
    "Frontend] Translation for aten::avg_pool2d do not support divisor_override input.\n\nSummary:\n-- Conversion is "
    "failed for: aten::avg_pool3d\n")


def test_openvinos_report_of_unconverted_operations_is_classed_by_the_frontends_reason() -> None:
    assert error_class(OPENVINO_REPORT) == ("OpConversionFailure: [PyTorch Frontend] Translation for aten::avg_pool2d"
                                            " do not support divisor_override input.")
    no_rule = ("openvino._pyopenvino.OpConversionFailure: Check 'false' failed at unconverted_ops_report.cpp:151:\n"
               "Model wasn't fully converted.\nSummary:\n-- No conversion rule found for operations: aten::erfinv\n")
    assert "No conversion rule found for operations: aten::erfinv" in error_class(no_rule)
    step = ("openvino._pyopenvino.OpConversionFailure: Check 'false' failed at src/frontends/common_translators/src/"
            "unconverted_ops_report.cpp:151:\nFrontEnd API failed with OpConversionFailure:\nModel wasn't fully "
            "converted.\nSummary:\n-- normalize step failed with: Exception from src/core/src/shape_util.cpp:66:\n"
            "Accessing out-of-range dimension\n")
    assert error_class(step) == "OpConversionFailure: the frontend's normalize step failed: Accessing out-of-range " \
                                "dimension"


def test_a_dynamo_node_named_after_its_torch_operator_files_that_operators_translation() -> None:
    squeeze = ("onnx.onnx_cpp2py_export.shape_inference.InferenceError: [ShapeInferenceError] Inference error(s): "
               "(op_type:Squeeze, node name: node_avg_pool2d): [ShapeInferenceError] Inferred shape and existing "
               "shape differ in dimension 1: (2) vs (1)")
    cause = root_cause("torch-onnx-dynamo", "validation", "invalid_model", squeeze, None, ("sin", "avg_pool2d"))
    assert cause.operator == "avg_pool2d"
    numbered = squeeze.replace("node_avg_pool2d", "node_avg_pool2d_3")
    assert root_cause("torch-onnx-dynamo", "validation", "invalid_model", numbered, None,
                      ("avg_pool2d",)).operator == "avg_pool2d"
    # A node named after the ONNX operator it is (node_Conv_15), or a torch operator not in the graph, is not mapped.
    assert root_cause("torch-onnx-dynamo", "validation", "invalid_model", squeeze, None, ("sin",)).operator == "Squeeze"
