"""`convsmith check MODEL` on a user's ONNX model: faults of each kind planted through the registry by ONNX tools are
located at the right node, diagnosed as the right kind, and repaired so that the oracle passes; a repair that does
not pass is reported as not repaired; bad input is one line and exit 2."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.runtime import run_onnx_target
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.modelcheck.check_model import ModelResult, check_model
from fuzzer.modelcheck.diagnose import FaultKind
from fuzzer.modelcheck.keras_layers import compare_layouts
from fuzzer.modelcheck.loading import load_model
from fuzzer.modelcheck.repair import repair
from fuzzer.support.errors import Exit
from oracles.verdict import Symptom


class PlantedTool(OnnxPassConverter):
    libraries = ("onnxruntime",)
    distributions = ("onnx", "onnxruntime")
    options_type = UpstreamOptions


def _node(model: onnx.ModelProto, op_type: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type == op_type)


class PerturbWeight(PlantedTool):
    name = "perturb-weight"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        return self.perturb(model, "w")

    @staticmethod
    def perturb(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
        tensor = next(t for t in model.graph.initializer if t.name == name)
        array = numpy_helper.to_array(tensor).copy()
        array.flat[5] += 0.5
        tensor.CopyFrom(numpy_helper.from_array(array, name))
        return model


class DropPads(PlantedTool):
    name = "drop-pads"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        conv = _node(model, "Conv")
        kept = [a for a in conv.attribute if a.name != "pads"]
        del conv.attribute[:]
        conv.attribute.extend(kept)
        return model


class ChangeAlpha(PlantedTool):
    name = "change-alpha"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        leaky = _node(model, "LeakyRelu")
        del leaky.attribute[:]
        leaky.attribute.append(helper.make_attribute("alpha", 0.3))
        return model


class SwapNode(PlantedTool):
    name = "swap-node"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        _node(model, "Relu").op_type = "Sigmoid"
        return model


class DropNode(PlantedTool):
    """Removes the Relu and feeds its reader from the Relu's input."""

    name = "drop-node"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        relu = _node(model, "Relu")
        for node in model.graph.node:
            node.input[:] = [relu.input[0] if i == relu.output[0] else i for i in node.input]
        model.graph.node.remove(relu)
        return model


class NhwcInput(PlantedTool):
    """Declares the image input channels-last and transposes it back inside the graph."""

    name = "nhwc-input"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        value = model.graph.input[0]
        value.CopyFrom(helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 6, 6, 3]))
        for node in model.graph.node:
            node.input[:] = ["x_nchw" if i == "x" else i for i in node.input]
        model.graph.node.insert(0, helper.make_node("Transpose", ["x"], ["x_nchw"], perm=[0, 3, 1, 2]))
        return model


class HalfInput(PlantedTool):
    """Declares the input float16 and casts it up inside the graph."""

    name = "half-input"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
        for node in model.graph.node:
            node.input[:] = ["x_float" if i == "x" else i for i in node.input]
        model.graph.node.insert(0, helper.make_node("Cast", ["x"], ["x_float"], to=onnx.TensorProto.FLOAT))
        return model


class RoundConstant(PlantedTool):
    """Rounds the float64 model's scale constant to float32."""

    name = "round-constant"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        tensor = next(t for t in model.graph.initializer if t.name == "scale")
        rounded = numpy_helper.to_array(tensor).astype(np.float32).astype(np.float64)
        tensor.CopyFrom(numpy_helper.from_array(rounded, "scale"))
        return model


class TwoFaults(PlantedTool):
    """A perturbed weight and a swapped node: one round of repair undoes only the first."""

    name = "two-faults"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        return SwapNode().transform(PerturbWeight().transform(model, options), options)


PLANTED = ConverterRegistry([PerturbWeight(), DropPads(), ChangeAlpha(), SwapNode(), DropNode(), NhwcInput(),
                             HalfInput(), TwoFaults()])
FLOAT64_PLANTED = ConverterRegistry([RoundConstant()])


def conv_model() -> onnx.ModelProto:
    """Conv (padded) -> LeakyRelu -> Relu -> Add, float32, weights from a fixed seed."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["conv"], ["leaky"], name="leaky", alpha=0.01),
             helper.make_node("Relu", ["leaky"], ["relu"], name="relu"),
             helper.make_node("Add", ["relu", "leaky"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 6, 6])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def scale_model() -> onnx.ModelProto:
    """y = -(x * pi) in float64."""
    scale = numpy_helper.from_array(np.array([np.pi], np.float64), "scale")
    nodes = [helper.make_node("Mul", ["x", "scale"], ["scaled"], name="mul"),
             helper.make_node("Neg", ["scaled"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "scale", [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, [8])], [scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelResult]:
    path = tmp_path_factory.mktemp("model") / "conv.onnx"
    onnx.save(conv_model(), str(path))
    found = check_model(load_model(str(path), 0), PLANTED, (), 0)
    return {r.conversion.converter: r for r in found}


EXPECTED = {  # converter: (located op type, its node, the kind, the sentence)
    "perturb-weight": ("Conv", "conv", FaultKind.PARAMETER, "constant w differs from the source's (max abs 0.5)"),
    "drop-pads": ("Conv", "conv", FaultKind.HYPERPARAMETER, "Conv conv: pads dropped (source: [1, 1, 1, 1])"),
    "change-alpha": ("LeakyRelu", "leaky", FaultKind.HYPERPARAMETER,
                     "LeakyRelu leaky: alpha 0.30000001192092896 where the source has 0.009999999776482582"),
    "swap-node": ("Sigmoid", "relu", FaultKind.GRAPH, "node relu is Sigmoid where the source has Relu"),
    "drop-node": ("Add", "add", FaultKind.GRAPH, "Add add: the source's Relu before it is missing"),
}


@pytest.mark.parametrize("converter", sorted(EXPECTED))
def test_each_planted_fault_is_located_diagnosed_and_repaired(results: dict[str, ModelResult], converter: str
                                                             ) -> None:
    result = results[converter]
    assert result.conversion.verdict.is_bug
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    op_type, node, kind, detail = EXPECTED[converter]
    assert step.location is not None
    assert (step.location.op_type, step.location.node) == (op_type, node)
    assert step.location.before == 0.0 and step.location.after > 0.0
    assert [(f.kind, f.detail) for f in step.findings] == [(kind, detail)]
    repaired = onnx.load_from_string(result.repair.model)
    assert [n.op_type for n in repaired.graph.node if n.op_type in ("Relu", "Sigmoid")] == ["Relu"]


def test_a_wrong_input_layout_is_diagnosed_and_repaired_with_a_transpose(results: dict[str, ModelResult]) -> None:
    result = results["nhwc-input"]
    assert result.conversion.verdict.is_bug
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is None
    assert [(f.kind, f.detail) for f in step.findings] == [
        (FaultKind.INPUT, "input x has layout (1, 6, 6, 3) where the source takes (1, 3, 6, 6) (perm [0, 2, 3, 1])")]


def test_an_input_of_another_dtype_is_diagnosed_and_repaired_with_a_cast(results: dict[str, ModelResult]) -> None:
    result = results["half-input"]
    assert result.conversion.verdict.is_bug
    assert result.repair is not None and result.repair.repaired
    first, second = result.repair.rounds  # the float16 input restored, then the lossy Cast it went through
    assert [(f.kind, f.detail) for f in first.findings] == [
        (FaultKind.INPUT, "input x is float16 where the source takes float32")]
    assert second.location is not None and (second.location.op_type, second.location.node) == ("Conv", "conv")
    assert [(f.kind, f.detail) for f in second.findings] == [
        (FaultKind.GRAPH, "Conv conv reads ['x_float'] through an extra Cast")]


def test_a_float64_constant_rounded_to_float32_is_a_parameter_fault(tmp_path: Path) -> None:
    path = tmp_path / "scale.onnx"
    onnx.save(scale_model(), str(path))
    (result,) = check_model(load_model(str(path), 0), FLOAT64_PLANTED, (), 0)
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and (step.location.op_type, step.location.node) == ("Mul", "mul")
    assert [(f.kind, f.detail) for f in step.findings] == [
        (FaultKind.PARAMETER, "constant scale is the source's rounded to float32")]


def test_a_repair_that_does_not_pass_the_oracle_is_not_claimed(results: dict[str, ModelResult]) -> None:
    conversion = results["two-faults"].conversion
    assert conversion.source_onnx is not None and conversion.target_onnx is not None
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)}
    once = repair(conversion.source_onnx, conversion.target_onnx, feeds, feeds, rounds=1)
    assert (once.repaired, once.reason) == (False, "the edited model still fails the oracle")
    assert [f.kind for r in once.rounds for f in r.findings] == [FaultKind.PARAMETER]
    assert results["two-faults"].repair is not None and results["two-faults"].repair.repaired  # given the rounds


def test_the_command_writes_the_folder_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "conv.onnx"
    onnx.save(conv_model(), str(path))
    out = tmp_path / "out"
    code = main(["check", str(path), "--registry", "test_modelcheck:PLANTED", "--converters", "drop-pads",
                 "--out", str(out)])
    assert code == Exit.BUG
    assert "hyperparameter: Conv conv: pads dropped" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "drop-pads").iterdir()) == [
        "converted.onnx", "crash-drop-pads-validation-InferenceError-d0247312582c-reduced", "located.dot",
        "repaired.onnx"]  # the case folder of the failure, cut to its node (tests/test_modelcheck_filing.py)
    picture = (out / "drop-pads" / "located.dot").read_text()
    assert 'n0 [fillcolor="#f4cccc", label="Conv\\nconv\\nafter: inf"];' in picture
    assert (out / "verdicts.json").is_file() and (out / "summary.md").is_file()


def raising_factory() -> object:
    raise RuntimeError("no weights here")


@pytest.mark.parametrize(("argv", "message"), [
    (["check", "{tmp}/not.onnx"], "not a valid ONNX model"),
    (["check", "test_modelcheck:raising_factory"], "the factory raised RuntimeError: no weights here"),
    (["check", "{tmp}/conv.onnx", "--inputs", "{tmp}/wrong.npz"], "x is float32[1, 3, 5, 5], the model takes"),
    (["check", "--zoo", "no-such-entry"], "unknown zoo entry 'no-such-entry'"),
    (["check", "{tmp}/conv.onnx", "--converters", "torch-onnx-script"],
     "torch-onnx-script: does not take an ONNX model"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                          message: str) -> None:
    (tmp_path / "not.onnx").write_bytes(b"not a model")
    onnx.save(conv_model(), str(tmp_path / "conv.onnx"))
    np.savez(tmp_path / "wrong.npz", x=np.zeros((1, 3, 5, 5), np.float32))
    code = main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == Exit.USAGE
    assert len(err.splitlines()) == 1 and message in err


class PerturbingExporter(TorchOnnxScript):
    """The TorchScript exporter, its model's first convolution weight perturbed."""

    name = "perturbing-exporter"
    weight = "inner.0.weight"

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        model = onnx.load_from_string(super().convert_impl(source, options).model or b"")
        PerturbWeight.perturb(model, self.weight)
        return run_onnx_target(model, source)


class PerturbingLastExporter(PerturbingExporter):
    """The same, on the last convolution of bn_net."""

    name = "perturbing-last-exporter"
    weight = "inner.3.weight"


EXPORTERS = ConverterRegistry([PerturbingExporter()])


def small_net() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1))
    return net, (torch.randn(1, 3, 6, 6),)


def test_an_exporters_perturbed_weight_is_located_at_its_layer_and_restored_from_the_module() -> None:
    (result,) = check_model(load_model("test_modelcheck:small_net", 0), EXPORTERS, (), 0)
    assert result.conversion.verdict.is_bug
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and (step.location.op_type, step.location.layer) == ("Conv", "inner.0")
    assert [(f.kind, f.detail) for f in step.findings] == [
        (FaultKind.PARAMETER, "constant inner.0.weight differs from the source's (max abs 0.5) (layer inner.0)")]


class NudgeOffset(PlantedTool):
    """Moves the offset by less than the tolerance; the gain after it carries the error beyond."""

    name = "nudge-offset"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        tensor = next(t for t in model.graph.initializer if t.name == "offset")
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) + np.float32(5e-5), "offset"))
        return model


def gain_model() -> onnx.ModelProto:
    """y = (x + offset - x - 0.25) * 1e4: zero up to rounding, the offset's error amplified only at the end."""
    offset = numpy_helper.from_array(np.full(8, 0.25, np.float32), "offset")
    quarter = numpy_helper.from_array(np.array([0.25], np.float32), "quarter")
    gain = numpy_helper.from_array(np.array([1e4], np.float32), "gain")
    nodes = [helper.make_node("Add", ["x", "offset"], ["shifted"], name="add"),
             helper.make_node("Sub", ["shifted", "x"], ["back"], name="back"),
             helper.make_node("Sub", ["back", "quarter"], ["residue"], name="residue"),
             helper.make_node("Mul", ["residue", "gain"], ["y"], name="gain")]
    graph = helper.make_graph(nodes, "gain", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [8])],
                              [offset, quarter, gain])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_fault_below_the_tolerance_at_its_node_is_diagnosed_at_that_node(tmp_path: Path) -> None:
    path = tmp_path / "gain.onnx"
    onnx.save(gain_model(), str(path))
    (result,) = check_model(load_model(str(path), 0), ConverterRegistry([NudgeOffset()]), (), 0)
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and (step.location.op_type, step.location.node) == ("Mul", "gain")
    assert [(f.kind, f.at) for f in step.findings] == [(FaultKind.PARAMETER, "shifted")]


def test_json_with_inputs_from_an_npz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(conv_model(), str(tmp_path / "conv.onnx"))
    np.savez(tmp_path / "inputs.npz", x=np.full((1, 3, 6, 6), 0.5, np.float32))
    code = main(["check", str(tmp_path / "conv.onnx"), "--registry", "test_modelcheck:PLANTED", "--converters",
                 "swap-node", "--inputs", str(tmp_path / "inputs.npz"), "--json"])
    (verdict,) = json.loads(capsys.readouterr().out)
    assert code == Exit.BUG
    assert (verdict["converter"], verdict["symptom"], verdict["repair"]["repaired"]) == ("swap-node", "wrong_values",
                                                                                         True)
    (step,) = verdict["repair"]["rounds"]
    assert (step["located"]["op_type"], step["located"]["node"]) == ("Sigmoid", "relu")
    assert [d["kind"] for d in step["diagnosis"]] == ["graph"]


def test_onnx_runtimes_optimizer_is_checked_on_the_model_it_optimized(tmp_path: Path) -> None:
    onnx.save(conv_model(), str(tmp_path / "conv.onnx"))
    (result,) = check_model(load_model(str(tmp_path / "conv.onnx"), 0), CONVERTERS, ("ort-optimizer",), 0)
    assert result.conversion.verdict.symptom is Symptom.PASS and result.repair is None
    optimized = onnx.load_from_string(result.conversion.target_onnx or b"")
    assert [n.op_type for n in optimized.graph.node] != [n.op_type for n in conv_model().graph.node]


def test_a_model_onnx_runtime_cannot_run_is_one_line_and_exit_2(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    model = conv_model()
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros((4, 5, 3, 3), np.float32), "w"))
    onnx.save(model, str(tmp_path / "broken.onnx"))
    assert main(["check", str(tmp_path / "broken.onnx")]) == Exit.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "broken.onnx: ONNX Runtime cannot run the model itself" in err


def bn_net() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Conv2d(4, 2, 1))
    with torch.no_grad():  # a batch norm that changes values, so that folding it shows
        net[1].running_mean.uniform_(-1, 1)
        net[1].running_var.uniform_(0.5, 2)
    return net, (torch.randn(1, 3, 6, 6),)


def test_a_batch_norm_folded_into_its_convolution_is_not_taken_for_the_divergence() -> None:
    registry = ConverterRegistry([PerturbingLastExporter()])
    (result,) = check_model(load_model("test_modelcheck:bn_net", 0), registry, (), 0)
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and (step.location.op_type, step.location.layer) == ("Conv", "inner.3")
    assert step.location.before < 1e-4
    assert [(f.kind, f.detail) for f in step.findings] == [
        (FaultKind.PARAMETER, "constant inner.3.weight differs from the source's (max abs 0.5) (layer inner.3)")]


class PerturbingFoldedExporter(TorchOnnxScript):
    """The TorchScript exporter, which folds bn_net's batch norm into the first convolution (its weight then named
    after neither module), that weight's first output channel perturbed."""

    name = "perturbing-folded-exporter"

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        model = onnx.load_from_string(super().convert_impl(source, options).model or b"")
        first = next(n for n in model.graph.node if n.op_type == "Conv")
        tensor = next(t for t in model.graph.initializer if t.name == first.input[1])
        array = numpy_helper.to_array(tensor).copy()
        array[0] += 0.5
        tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
        return run_onnx_target(model, source)


def test_a_weight_with_a_batch_norm_folded_in_is_restored_from_the_folded_module_weights() -> None:
    registry = ConverterRegistry([PerturbingFoldedExporter()])
    (result,) = check_model(load_model("test_modelcheck:bn_net", 0), registry, (), 0)
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and step.location.layer == "inner.0"
    (finding,) = step.findings
    assert finding.kind is FaultKind.PARAMETER
    assert finding.detail.startswith("constant onnx::Conv_") and finding.detail.endswith(
        "differs from the source's (max abs 0.5) (layer inner.0)")


@dataclass(frozen=True)
class CarefulOptions(UpstreamOptions):
    careful: bool = False


class CrashUnlessCareful(PlantedTool):
    """A tool that fails on any model unless told to be careful, and says so as its setting to avoid a bug."""

    name = "crash-unless-careful"
    options_type = CarefulOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if not getattr(options, "careful", False):
            raise RuntimeError("planted: not careful")
        return model

    def avoid_settings(self, options: CarefulOptions, hints: Hints) -> tuple[Setting, ...]:
        careful = CarefulOptions(**{**options.to_json(), "careful": True})
        return (Setting("careful mode", self.name, careful.to_json(), "tool(careful=True)"),)


def test_a_failure_no_edit_undoes_is_repaired_by_the_setting_that_avoids_it(tmp_path: Path) -> None:
    onnx.save(conv_model(), str(tmp_path / "conv.onnx"))
    (result,) = check_model(load_model(str(tmp_path / "conv.onnx"), 0), ConverterRegistry([CrashUnlessCareful()]),
                            (), 0)
    assert result.conversion.verdict.symptom is Symptom.CRASH
    assert result.repair is not None and result.repair.repaired and result.repair.model is None
    assert result.repair.reason.startswith("re-converted with careful mode (tool(careful=True))")


class RenameAndSwap(PlantedTool):
    """Renames every value between the graph's inputs and outputs, and turns the Relu into a Sigmoid."""

    name = "rename-and-swap"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        names = {"conv": "t0", "leaky": "t1", "relu": "t2"}
        for node in model.graph.node:
            node.input[:] = [names.get(i, i) for i in node.input]
            node.output[:] = [names.get(o, o) for o in node.output]
        return SwapNode().transform(model, options)


def test_a_model_whose_values_a_tool_renamed_is_named_back_then_located_and_repaired(tmp_path: Path) -> None:
    onnx.save(conv_model(), str(tmp_path / "conv.onnx"))
    (result,) = check_model(load_model(str(tmp_path / "conv.onnx"), 0), ConverterRegistry([RenameAndSwap()]), (), 0)
    assert result.repair is not None and result.repair.repaired
    assert result.repair.reason.endswith("(its values named back after the source's first)")
    (step,) = result.repair.rounds
    assert step.location is not None and (step.location.op_type, step.location.output) == ("Sigmoid", "relu")
    assert [(f.kind, f.detail) for f in step.findings] == [
        (FaultKind.GRAPH, "node relu is Sigmoid where the source has Relu")]


def test_a_keras_layers_value_is_compared_in_either_layout_and_in_units_of_its_range() -> None:
    expected = (np.arange(60, dtype=np.float32).reshape(1, 4, 5, 3) - 30) * 1000  # channels-last, zero among them
    drifted = np.transpose(expected, (0, 3, 1, 2)) + np.float32(0.05)  # channels-first, summed in another order
    metric = compare_layouts(drifted, expected)
    assert metric is not None and metric.ok and metric.max_abs == pytest.approx(0.05, abs=5e-3)  # float32 spacing there
    wrong = np.transpose(expected, (0, 3, 1, 2)).copy()
    wrong[0, 0, 0, 0] += 500.0
    metric = compare_layouts(wrong, expected)
    assert metric is not None and not metric.ok and metric.max_abs == pytest.approx(500.0)
    assert compare_layouts(np.zeros((1, 2, 2, 2), np.float32), expected) is None


class CrashNamingLeaky(CrashUnlessCareful):
    """The same, its failure naming the node it was converting."""

    name = "crash-naming-leaky"

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if not getattr(options, "careful", False):
            raise RuntimeError("planted: cannot convert node 'leaky'")
        return model


def test_the_node_a_failure_message_names_is_the_located_node(tmp_path: Path) -> None:
    onnx.save(conv_model(), str(tmp_path / "conv.onnx"))
    (result,) = check_model(load_model(str(tmp_path / "conv.onnx"), 0), ConverterRegistry([CrashNamingLeaky()]),
                            (), 0)
    assert result.repair is not None and result.repair.repaired
    where = result.repair.rounds[0].location
    assert where is not None and (where.op_type, where.node, where.after) == ("LeakyRelu", "leaky", float("inf"))


def test_an_importer_takes_a_pytorch_model_through_the_torch_exporter_its_options_name(
        capsys: pytest.CaptureFixture[str]) -> None:
    """OpenVINO's ONNX frontend (and onnx2tf) start from an exporter's model of a PyTorch model, as the campaign runs
    them on zoo models: `check` takes them too, so a zoo finding's line checks it again."""
    if not CONVERTERS["openvino-onnx"].availability()[0]:
        pytest.skip("openvino is not installed")
    code = main(["check", "test_modelcheck:small_net", "--converters", "openvino-onnx", "--option",
                 'upstream="torch-onnx-script"', "--option", "opset=17", "--no-repair"])
    assert code == Exit.OK, capsys.readouterr().err
    assert "openvino-onnx: pass" in capsys.readouterr().out
