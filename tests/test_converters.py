"""Every registered converter turns a small known graph into a pass; failures are classified by stage."""

from __future__ import annotations

import time
import traceback

import hand_graphs
import onnx
import pytest

from fuzzer.check.pipeline import CheckOptions, check_prepared, prepare, run_check
from fuzzer.converters import CONVERTERS, NOT_OFFERED, Converter, Role, capabilities, list_converters
from fuzzer.converters.capabilities import ExportsUpstream, expresses
from fuzzer.converters.conversion import SharedExport, Steps
from fuzzer.converters.culprit import Culprit, FoundBy, from_labels
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
from fuzzer.converters.upstream import upstream_default_opset, upstream_names, upstream_opsets
from generators.dtypes import DType
from oracles.taxonomy import Failure, classify
from oracles.verdict import Stage, Symptom

INFO = {info.name: info for info in list_converters()}
EXPORTERS = tuple(c.name for c in CONVERTERS.upstreams())  # the exporters an ONNX tool can start from
FAST_CHECK = CheckOptions(rerun=False, locate=False, culprit=False)


def _skip_unavailable(name: str) -> None:
    if not INFO[name].available:
        pytest.skip(f"{name} unavailable here: {INFO[name].reason}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONVERTERS))
def test_every_converter_passes_conv_relu_add(name: str) -> None:
    _skip_unavailable(name)
    graph = hand_graphs.conv_relu_add()
    if not expresses(CONVERTERS[name], graph):  # a framework without a convolution of torch's: elementwise ops
        graph = hand_graphs.elementwise()
    assert expresses(CONVERTERS[name], graph)
    result = run_check(graph, 0, name, check_options=FAST_CHECK)
    assert result.verdict.symptom is Symptom.PASS, result.verdict.message
    assert result.verdict.converter == name
    assert "oracle" in result.timings and result.target is not None


@pytest.mark.parametrize("name,options", [
    ("torch-onnx-dynamo", {"optimize": False, "opset": 18}),
    ("torch-onnx-script", {"opset": 13}),
    ("ort-optimizer", {"level": "basic"}),
    ("onnx-version-converter", {"target_opset": 15}),
    ("onnxoptimizer", {"upstream": "torch-onnx-dynamo", "opset": 18}),
    ("tf2onnx", {"source": "keras", "optimize": False, "opset": 17}),
    ("onnx2tf", {"target": "tflite", "upstream": "torch-onnx-script", "onnxsim": False}),
])
def test_options_variants_pass(name: str, options: dict) -> None:
    _skip_unavailable(name)
    verdict = run_check(hand_graphs.elementwise(), 1, name, options, FAST_CHECK).verdict
    assert verdict.symptom is Symptom.PASS, verdict.message


def test_version_converter_without_adapter_is_unsupported() -> None:
    """onnx has no Mul(14) -> Mul(13) adapter: a documented gap, counted as unsupported, not a bug."""
    options = {"target_opset": 13}
    verdict = run_check(hand_graphs.elementwise(), 1, "onnx-version-converter", options, FAST_CHECK).verdict
    assert (verdict.symptom, verdict.stage) == (Symptom.UNSUPPORTED, Stage.NODE_CONVERSION), verdict.message
    assert not verdict.is_bug


def test_version_converter_refusing_a_type_the_target_opset_lacks_is_unsupported() -> None:
    """Its TypeRestriction adapter fails an assertion on a bfloat16 Sin (allowed from opset 22) taken to opset 21:
    the target cannot express it, so it is unsupported, as a missing adapter is; another assertion stays a crash."""
    from onnx import version_converter

    model = hand_graphs.one_node_model("Sin", onnx.TensorProto.BFLOAT16, [3], 22)
    with pytest.raises(RuntimeError) as raised:
        version_converter.convert_version(model, 21)
    converter = CONVERTERS["onnx-version-converter"]
    refused = Failure.of(Stage.NODE_CONVERSION, raised.value)
    assert classify(refused, converter.unsupported_messages) is Symptom.UNSUPPORTED
    other = Failure(Stage.NODE_CONVERSION, "builtins.RuntimeError", "transformers.h:45: operator(): Assertion "
                    "`node->s(attr) == value` failed: Attribute reduction must have value none", "")
    assert classify(other, converter.unsupported_messages) is Symptom.CRASH


def test_registry_lists_every_converter_with_versions() -> None:
    required = {"torch-onnx-dynamo", "torch-onnx-script", "ort-optimizer", "onnxsim", "onnxslim", "onnxoptimizer",
                "onnx-version-converter"}
    assert required <= set(INFO)
    for info in INFO.values():
        assert info.versions and (info.available or info.reason)


def test_every_converter_declares_its_role_framework_runtime_and_repro_functions() -> None:
    for conv in CONVERTERS.values():
        info = conv.info()
        assert (info.role, info.framework, info.runtime) == (conv.role.value, conv.framework, conv.runtime)
        assert conv.framework and conv.runtime and conv.repro_conversion, conv.name
        if conv.role is Role.EXPORTER:
            assert conv.framework != "onnx" and not conv.repro_upstream_conversion, conv.name
            # An upstream whose model a script can remake from the source declares how (tf2onnx's is read from the
            # saved upstream.onnx); only an upstream declares one.
            assert isinstance(conv, ExportsUpstream) or not conv.repro_upstream_export, conv.name
        else:
            assert conv.framework == "onnx" and conv.repro_upstream_conversion, conv.name
            assert not isinstance(conv, ExportsUpstream), conv.name
    assert [c.name for c in CONVERTERS.upstreams()] == ["torch-onnx-dynamo", "torch-onnx-script", "tf2onnx"]
    assert upstream_names() == ("torch-onnx-dynamo", "torch-onnx-script", "tf2onnx", "onnx-native")
    assert (upstream_opsets("torch-onnx-dynamo"), upstream_default_opset("torch-onnx-script")) == ((18, 23), 17)


def test_onnx2torch_is_not_offered_and_says_why() -> None:
    assert "onnx2torch" not in CONVERTERS
    assert dict(NOT_OFFERED)["onnx2torch"].startswith("its import of torchvision fails")


def test_options_round_trip_through_json() -> None:
    for conv in CONVERTERS.values():
        opts = conv.options()
        assert conv.options(opts.to_json()) == opts
    with pytest.raises(ValueError, match="no option"):
        CONVERTERS["torch-onnx-script"].options({"nonsense": 1})


@pytest.mark.parametrize("message,exc_type,stage,symptom", [
    ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Mul(14) node with name 'n'",
     "onnxruntime.NotImplemented", Stage.RUNTIME_LOAD, Symptom.UNSUPPORTED),
    ("Exporting the operator 'aten::foo' to ONNX opset version 17 is not supported.", "torch.onnx.errors."
     "UnsupportedOperatorError", Stage.NODE_CONVERSION, Symptom.UNSUPPORTED),
    ("Unsupported: ONNX export of operator cummax", "torch.onnx.errors.SymbolicValueError",
     Stage.NODE_CONVERSION, Symptom.UNSUPPORTED),
    ("[ShapeInferenceError] Inferred shape and existing shape differ", "onnx.ShapeInferenceError",
     Stage.VALIDATION, Symptom.INVALID_MODEL),
    ("index out of range", "builtins.IndexError", Stage.GRAPH_OPTIMIZATION, Symptom.CRASH),
])
def test_failures_are_classified(message: str, exc_type: str, stage: Stage, symptom: Symptom) -> None:
    assert classify(Failure(stage, exc_type, message, "")) is symptom


def test_bfloat16_graph_is_fed_and_judged_without_crashing() -> None:
    """ORT has few bfloat16 kernels: the verdict is unsupported (counted) or pass, never our own error."""
    g = hand_graphs.GraphBuilder()
    a = g.input((2, 3), DType.BFLOAT16)
    g.op("cast_float32", (g.op("add", (a, a), (2, 3), DType.BFLOAT16),), (2, 3), DType.FLOAT32, to="float32")
    verdict = run_check(g.build(), 0, "torch-onnx-script", check_options=FAST_CHECK).verdict
    assert verdict.symptom in (Symptom.PASS, Symptom.UNSUPPORTED), verdict.message


def test_float16_cast_graph_passes() -> None:
    verdict = run_check(hand_graphs.hardtanh_cast(), 2, "torch-onnx-script", check_options=FAST_CHECK).verdict
    assert verdict.symptom is Symptom.PASS, verdict.message


def test_source_inputs_follow_graph_order() -> None:
    graph = hand_graphs.conv_relu_add()
    expected = prepare(graph, 0, {}, 1.0)
    assert [tuple(x.shape) for x in expected.source.inputs] == [graph.inputs[n].shape for n in graph.inputs]


def test_ort_culprit_search_runs_and_names_the_lowest_level() -> None:
    """With a predicate that always diverges, the lowest level is basic and no single optimizer is guilty."""
    graph = hand_graphs.conv_relu_add()
    expected = prepare(graph, 0, {}, 1.0)
    conv = CONVERTERS["ort-optimizer"]
    run = conv.convert(expected.source)
    found = conv.bisect(expected.source, conv.options(), run, lambda outputs: True)
    assert found == Culprit("ort-optimizer", FoundBy.BISECTION, "", "basic")
    assert found.labels() == ("ort-level:basic",) and from_labels(conv.name, found.labels()) == found
    assert conv.bisect(expected.source, conv.options(), run, lambda outputs: False) is None


def _declaring_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The planted exporter bug: the model's output cast to float64 and declared so, where the graph's is float32."""
    model = onnx.load_from_string(model.SerializeToString())
    out = model.graph.output[0]
    model.graph.node.append(onnx.helper.make_node("Cast", [out.name], [f"{out.name}_d"], to=onnx.TensorProto.DOUBLE))
    out.name, out.type.tensor_type.elem_type = f"{out.name}_d", onnx.TensorProto.DOUBLE
    return model


def test_an_exporter_dtype_bug_is_not_blamed_on_the_onnx_passes_after_it() -> None:
    """An upstream export that declares the wrong dtype (planted: a float32 output declared float64) is its exporter's
    bug: the ONNX-to-ONNX converters that start from it say so (Stage.SOURCE) and are not blamed."""
    g = hand_graphs.GraphBuilder()
    x = g.input((2, 3))
    graph = g.build((g.op("sin", (x,), (2, 3)),))
    for name in ("ort-optimizer", "onnxsim", "onnxoptimizer"):
        _skip_unavailable(name)
        prepared, converter = prepare(graph, 0, {}, 1.0), CONVERTERS[name]
        options = converter.options({"upstream": "torch-onnx-script"})
        steps = Steps()
        model = _declaring_float64(export_script(prepared.source, ScriptOptions(opset=options.opset), steps))
        data = check_and_serialize(model, steps)
        outputs, dtypes = run_model(data, prepared.source, steps)
        prepared.source.exports[("torch-onnx-script", options.opset)] = SharedExport(data, outputs, dtypes)
        verdict = check_prepared(prepared, converter, options).verdict
        assert verdict.stage is Stage.SOURCE and not verdict.is_bug, (name, verdict.message)
        assert "the exporter's bug" in verdict.message, (name, verdict.message)


def test_onnx_to_onnx_converters_share_one_upstream_export_per_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each graph is exported once for all the ONNX-to-ONNX converters that start from the same exporter and
    opset; its failure (planted: the exporter fails on any graph holding sin) is shared too, and stays the
    exporter's (Stage.SOURCE)."""
    from fuzzer.check.judge import judge
    from fuzzer.converters import torch_onnx_script

    real = torch_onnx_script.export_script

    def failing_on_sin(source, options, steps):  # noqa: ANN001, ANN202
        if any(node.op == "sin" for node in source.graph.nodes):
            with steps.at(Stage.NODE_CONVERSION, "export"):
                raise RuntimeError("planted: no symbolic for sin")
        return real(source, options, steps)

    monkeypatch.setattr(torch_onnx_script, "export_script", failing_on_sin)
    good = prepare(hand_graphs.conv_relu_add(), 0, {}, 1.0)
    g = hand_graphs.GraphBuilder()
    x = g.input((2, 3))
    bad = prepare(g.build((g.op("sin", (x,), (2, 3)),)), 0, {}, 1.0)
    first_timings: dict[str, float] = {}
    seen = []
    for i, name in enumerate(("onnxoptimizer", "onnx-version-converter", "ort-optimizer")):
        _skip_unavailable(name)
        converter = CONVERTERS[name]
        timings: dict[str, float] = first_timings if i == 0 else {}
        result = judge(good, converter, converter.options(), timings)
        assert result.verdict.symptom is Symptom.PASS, (name, result.verdict.message)
        assert ("upstream_export" in timings) == (i == 0), (name, sorted(timings))
        failed_timings: dict[str, float] = {}
        failed = judge(bad, converter, converter.options(), failed_timings).verdict
        assert failed.stage is Stage.SOURCE and not failed.is_bug, (name, failed.message)
        # The failed export is booked by the test that made it, like a good one.
        assert ("upstream_export" in failed_timings) == (i == 0), (name, sorted(failed_timings))
        seen.append(failed.message)
    assert len(set(seen)) == 1 and "planted: no symbolic for sin" in seen[0]
    assert list(good.source.exports) == [("torch-onnx-script", 17)]


@pytest.mark.parametrize("exporter", [c.name for c in CONVERTERS.upstreams()])
def test_an_onnx_tool_starts_from_the_export_its_exporters_own_test_made(exporter: str) -> None:
    """An exporter's test at an upstream's options (only the opset drawn) leaves its model and run for the ONNX tools
    of the same source; at other options (no folding, no optimizer...) it leaves nothing."""
    from fuzzer.check.judge import judge

    _skip_unavailable(exporter)
    _skip_unavailable("onnxoptimizer")
    tool, own = CONVERTERS["onnxoptimizer"], CONVERTERS[exporter]
    other = {"torch-onnx-script": {"constant_folding": False}, "torch-onnx-dynamo": {"optimize": False},
             "tf2onnx": {"source": "keras"}}[exporter]
    opset = own.options().opset + 1
    graph = hand_graphs.conv_relu_add()
    good = prepare(graph if expresses(own, graph) else hand_graphs.elementwise(), 0, {}, 1.0)
    assert judge(good, own, own.options({**other, "opset": opset}), {}).verdict.symptom is Symptom.PASS
    assert good.source.exports == {}
    exported = judge(good, own, own.options({"opset": opset}), {})
    assert exported.verdict.symptom is Symptom.PASS, exported.verdict.message
    assert list(good.source.exports) == [(exporter, opset)]
    timings: dict[str, float] = {}
    result = judge(good, tool, tool.options({"upstream": exporter, "opset": opset}), timings)
    assert result.verdict.symptom is Symptom.PASS and "upstream_export" not in timings, sorted(timings)
    assert result.target.baseline_model == exported.target.model


def test_an_exporters_failure_left_for_the_onnx_tools_stays_the_exporters() -> None:
    from fuzzer.check.judge import judge

    _skip_unavailable("onnxoptimizer")
    tool, own = CONVERTERS["onnxoptimizer"], CONVERTERS["torch-onnx-script"]
    g = hand_graphs.GraphBuilder()
    x = g.input((1, 1, 4, 2, 2))
    bad = prepare(g.build((g.op("pixel_shuffle", (x,), (1, 1, 1, 4, 4), upscale_factor=2),)), 0, {}, 1.0)
    own_failure = judge(bad, own, own.options({"opset": 16}), {}).verdict
    assert (own_failure.symptom, own_failure.stage) == (Symptom.UNSUPPORTED, Stage.NODE_CONVERSION)
    timings: dict[str, float] = {}
    failed = judge(bad, tool, tool.options({"upstream": "torch-onnx-script", "opset": 16}), timings).verdict
    assert (failed.symptom, failed.stage) == (Symptom.UNSUPPORTED, Stage.SOURCE) and not failed.is_bug
    assert own_failure.message in failed.message and "upstream_export" not in timings


def test_a_failure_names_the_raising_frame_and_formats_its_traceback_when_asked() -> None:
    def raises() -> None:
        raise ValueError("no such axis")

    try:
        raises()
    except ValueError as exc:
        failure = Failure.of(Stage.NODE_CONVERSION, exc)
        innermost = traceback.extract_tb(exc.__traceback__)[-1]
    assert failure.frame == f"{innermost.filename}:{innermost.lineno} in raises"
    assert (failure.exc_type, failure.message) == ("builtins.ValueError", "no such axis")
    assert "traceback" not in vars(failure)  # formatted only when asked for
    assert failure.traceback.startswith("Traceback (most recent call last):")
    assert failure.traceback.rstrip().endswith("ValueError: no such axis")
    assert Failure(Stage.NODE_CONVERSION, "E", "m", "").traceback == ""


def test_a_failed_conversion_books_its_time_under_the_step_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversion that fails (planted: the TorchScript export raises after 50 ms) brings its steps' timings with
    its error, so that a failed test's time is not booked as time no step accounts for."""
    from fuzzer.check.judge import judge
    from fuzzer.converters import torch_onnx_script

    def slow_failure(source, options, steps):  # noqa: ANN001, ANN202
        with steps.at(Stage.NODE_CONVERSION, "export"):
            time.sleep(0.05)
            raise RuntimeError("planted: the export gave up")

    monkeypatch.setattr(torch_onnx_script, "export_script", slow_failure)
    converter = CONVERTERS["torch-onnx-script"]
    timings: dict[str, float] = {}
    verdict = judge(prepare(hand_graphs.conv_relu_add(), 0, {}, 1.0), converter, converter.options(), timings).verdict
    assert verdict.stage is Stage.NODE_CONVERSION and "planted: the export gave up" in verdict.message
    assert timings["export"] >= 0.05


def _model_with_inputs(*names: str) -> onnx.ModelProto:
    nodes = [onnx.helper.make_node("Identity", [name], [f"out_{name}"]) for name in names]
    graph = onnx.helper.make_graph(
        nodes, "g", [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in names],
        [onnx.helper.make_tensor_value_info(f"out_{n}", onnx.TensorProto.FLOAT, [2]) for n in names])
    return onnx.helper.make_model(graph)


def test_an_onnx_tools_model_is_fed_by_the_upstreams_own_names_where_the_exporter_renamed_an_input() -> None:
    """The dynamo exporter writes an input that is also an output as `<name>_orig` (its run is then fed by
    position); a tool that drops an unused input of that model must still be fed by name, so by the upstream's."""
    from fuzzer.check.result import Expected
    from fuzzer.converters.runtime import declared_input_names
    from generators.builder import GraphBuilder
    from generators.dtypes import DType

    b = GraphBuilder()
    x, y = b.input((2,), DType.FLOAT32), b.input((2,), DType.FLOAT32)
    prepared = prepare(b.build((b.op("sin", (x,), (2,), DType.FLOAT32), b.op("cos", (y,), (2,), DType.FLOAT32))),
                       0, {}, 1.0)
    assert isinstance(prepared, Expected)
    source = prepared.source
    first, second = source.input_names
    assert declared_input_names(_model_with_inputs(first, second), source) == (first, second)
    assert declared_input_names(_model_with_inputs(first, "t4_orig"), source) == (first, "t4_orig")
    assert declared_input_names(_model_with_inputs(first), source) == (first, second)  # a name it knows: by name


def test_the_converter_base_declares_at_most_twelve_members_of_its_own() -> None:
    """What a converter can do beyond converting is a capability it opts into (capabilities.py), not a default here."""
    own = {k for k in vars(Converter) if not k.startswith("_")} | set(Converter.__annotations__)
    assert len(own) <= 12, sorted(own)


def _capabilities() -> list[type]:
    return [p for p in vars(capabilities).values() if isinstance(p, type) and getattr(p, "_is_runtime_protocol", False)]


def _members(protocol: type) -> set[str]:
    return {n for n in vars(protocol) if not n.startswith("_")} | set(getattr(protocol, "__annotations__", {}))


@pytest.mark.parametrize("name", list(CONVERTERS))
def test_a_converter_opts_into_a_capability_whole_or_not_at_all(name: str) -> None:
    """A capability is taken by defining its members: one defined without the rest (a typo, a hook renamed) would
    leave the converter out of it without a word."""
    converter = CONVERTERS[name]
    for protocol in _capabilities():
        defined = {m for m in _members(protocol) if hasattr(converter, m)}
        assert defined in (set(), _members(protocol)), (protocol.__name__, sorted(defined))
    assert not hasattr(converter, "culprit")  # the hook is RuntimeOptimizer.bisect or DivergenceLabels now
