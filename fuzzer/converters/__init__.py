"""The converter registry: one module per converter, collected into an immutable table at import.

Converter modules import their library lazily, so importing this package never fails for a missing
library; `list_converters()` says which entries can run here and why not.
"""

from __future__ import annotations

from fuzzer.converters.base import Converter, ConverterInfo
from fuzzer.converters.onnx2tf_importer import Onnx2Tf
from fuzzer.converters.onnx_graphsurgeon import GraphSurgeon
from fuzzer.converters.onnx_optimizer import OnnxOptimizer
from fuzzer.converters.onnx_simplifier import OnnxSim
from fuzzer.converters.onnx_slim import OnnxSlim
from fuzzer.converters.onnxscript_optimizer import OnnxscriptOptimizer, OnnxscriptOrtFusions
from fuzzer.converters.openvino_onnx import OpenVinoOnnx
from fuzzer.converters.openvino_pytorch import OpenVinoPytorch
from fuzzer.converters.ort_optimizer import OrtOptimizer
from fuzzer.converters.ort_shape_infer import OrtShapeInfer
from fuzzer.converters.ort_transformers import OrtTransformers
from fuzzer.converters.registry import DEFAULT_REGISTRY, ConverterRegistry, load_registry
from fuzzer.converters.role import Role
from fuzzer.converters.tf2onnx_exporter import Tf2Onnx
from fuzzer.converters.torch_onnx_dynamo import TorchOnnxDynamo
from fuzzer.converters.torch_onnx_script import TorchOnnxScript
from fuzzer.converters.version_converter import OnnxVersionConverter

CONVERTERS = ConverterRegistry([
    TorchOnnxDynamo(), TorchOnnxScript(), OrtOptimizer(), OnnxSim(), OnnxSlim(), OnnxOptimizer(),
    OnnxVersionConverter(), OrtTransformers(), OrtShapeInfer(), OnnxscriptOptimizer(), OnnxscriptOrtFusions(),
    GraphSurgeon(), Tf2Onnx(), Onnx2Tf(), OpenVinoPytorch(), OpenVinoOnnx(),
])

# Converters convsmith knows of but does not offer, and why (`convsmith converters` prints them).
NOT_OFFERED: tuple[tuple[str, str], ...] = (
    ("onnx2torch", "its import of torchvision fails beside the CPU build of torch (torchvision's wheels are built "
                   "against another torch), so it could never run"),
)


def list_converters() -> list[ConverterInfo]:
    """Every registered converter with its availability (and the reason when unavailable) and versions."""
    return [conv.info() for conv in CONVERTERS.values()]


def get_converter(name: str) -> Converter:
    return CONVERTERS[name]


__all__ = ["CONVERTERS", "DEFAULT_REGISTRY", "NOT_OFFERED", "Converter", "ConverterInfo", "ConverterRegistry", "Role",
           "get_converter", "list_converters", "load_registry"]
