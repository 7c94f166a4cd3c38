"""`convsmith check MODEL` on a user's Keras model (a .keras or .h5 file, a SavedModel folder): tf2onnx judged against
Keras, its wrong model located at the Keras layer and repaired from the layer's weights (a batch norm folded into
its convolution included); the ONNX tools and onnx2tf from tf2onnx's model, a planted tool's fault located at the
node whose Keras layer tf2onnx names, and repaired; bad input is one line and exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.tf2onnx_exporter import Tf2Onnx, Tf2OnnxOptions, import_quietly
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.modelcheck.check_model import ModelResult, check_model
from fuzzer.modelcheck.diagnose import FaultKind
from fuzzer.modelcheck.loading import load_model
from fuzzer.modelcheck.model import ModelKind
from fuzzer.support.errors import Exit
from generators.ir import Graph
from oracles.verdict import Symptom

pytestmark = pytest.mark.slow  # each builds and exports a Keras model (TensorFlow's import alone takes seconds)


def small_keras() -> Any:
    """Conv2D (padded) -> BatchNormalization (moved statistics) -> ReLU -> pooled -> Dense, weights from seed 0."""
    tf_keras = import_quietly("tf_keras")
    layers = tf_keras.layers
    x = layers.Input((8, 8, 3), batch_size=1, name="image")
    y = layers.Conv2D(4, 3, padding="same", name="conv")(x)
    y = layers.BatchNormalization(name="bn")(y)
    y = layers.ReLU(name="relu")(y)
    y = layers.GlobalAveragePooling2D(name="pool")(y)
    model = tf_keras.Model(x, layers.Dense(5, name="dense")(y))
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) if "variance" in v.name
                       else rng.standard_normal(w.shape).astype(np.float32)
                       for v, w in zip(model.weights, model.get_weights(), strict=True)])
    return model


def _perturb(proto: onnx.ModelProto, part: str) -> onnx.ModelProto:
    tensor = next(t for t in proto.graph.initializer if part in t.name and len(t.dims) > 1)
    array = numpy_helper.to_array(tensor).copy()
    array.flat[1] += 0.5
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return proto


class PerturbingTf2Onnx(Tf2Onnx):
    """tf2onnx, its model's Dense kernel perturbed."""

    name = "perturbing-tf2onnx"
    part = "dense"

    def export_model(self, model: Any, graph: Graph, options: Tf2OnnxOptions) -> onnx.ModelProto:
        return _perturb(super().export_model(model, graph, options), self.part)


class PerturbingFusedTf2Onnx(PerturbingTf2Onnx):
    """tf2onnx, the convolution's kernel (the batch norm folded in) perturbed."""

    name = "perturbing-fused-tf2onnx"
    part = "fused_bn"


class SwapRelu(OnnxPassConverter):
    """An ONNX tool that turns the Relu into a Sigmoid."""

    name = "swap-relu"
    libraries = ("onnxruntime",)
    distributions = ("onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        next(n for n in model.graph.node if n.op_type == "Relu").op_type = "Sigmoid"
        return model


PLANTED = ConverterRegistry([PerturbingTf2Onnx(), PerturbingFusedTf2Onnx(), SwapRelu(), CONVERTERS["onnx2tf"]])


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("keras")
    small_keras().save(folder / "small.keras")
    return folder / "small.keras"


@pytest.fixture(scope="module")
def results(saved: Path) -> dict[str, ModelResult]:
    if not CONVERTERS["tf2onnx"].availability()[0]:
        pytest.skip("tf2onnx is not available")
    return {r.conversion.converter: r for r in check_model(load_model(str(saved), 0), PLANTED, (), 0)}


@pytest.mark.parametrize(("converter", "layer", "detail"), [
    ("perturbing-tf2onnx", "dense", "differs from the source's (max abs 0.5) (layer dense)"),
    ("perturbing-fused-tf2onnx", "bn", "differs from the source's (max abs 0.5) (layer bn)"),
])
def test_tf2onnxs_perturbed_weight_is_located_at_its_keras_layer_and_restored(
        results: dict[str, ModelResult], converter: str, layer: str, detail: str) -> None:
    result = results[converter]
    assert result.conversion.verdict.symptom is Symptom.WRONG_VALUES
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and step.location.layer == layer
    assert step.location.before < 1e-4 < step.location.after
    (finding,) = step.findings
    assert finding.kind is FaultKind.PARAMETER and finding.detail.endswith(detail)


def test_a_tools_swapped_node_on_tf2onnxs_model_is_named_by_its_keras_layer(results: dict[str, ModelResult]) -> None:
    result = results["swap-relu"]
    assert result.repair is not None and result.repair.repaired
    (step,) = result.repair.rounds
    assert step.location is not None and (step.location.op_type, step.location.layer) == ("Sigmoid", "relu")
    assert [f.kind for f in step.findings] == [FaultKind.GRAPH]


def test_onnx2tf_converts_tf2onnxs_model_of_a_channels_last_image_offline(results: dict[str, ModelResult]) -> None:
    assert results["onnx2tf"].conversion.verdict.symptom is Symptom.PASS


@pytest.mark.parametrize("form", ["small.h5", "small_saved"])
def test_an_h5_file_and_a_savedmodel_folder_load_as_keras_models(tmp_path: Path, form: str) -> None:
    small_keras().save(tmp_path / form)
    model = load_model(str(tmp_path / form), 0)
    assert model.kind is ModelKind.KERAS
    assert [(s.name, s.shape, s.dtype) for s in model.slots] == [("image", (1, 8, 8, 3), "float32")]


def test_a_file_that_is_not_a_keras_model_is_one_line_and_exit_2(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken.h5").write_bytes(b"not a model")
    assert main(["check", str(tmp_path / "broken.h5")]) == Exit.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "broken.h5: not a Keras model" in err
