"""`convsmith check MODEL` on a 100 MB-class model: a ResNet-50-shaped network (bottleneck blocks 3, 4, 6, 3; about
25 million float32 weights; one 224x224 image) exported by the TorchScript exporter, and a planted ONNX tool that
perturbs one weight of its last stage; the seconds of the tool's check and of locate, diagnose and repair.

    python bench/modelcheck_large.py [--out build/bench-modelcheck-large]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import onnx
import torch
from onnx import numpy_helper
from torch import nn

from fuzzer.converters import CONVERTERS
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.modelcheck.check_model import check_model
from fuzzer.modelcheck.conversions import torch_source
from fuzzer.modelcheck.loading import load_model
from fuzzer.modelcheck.model import InputSlot, ModelKind, UserModel
from fuzzer.support.quiet import library_output


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) \
            if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


def resnet50_shaped() -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                               nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if b == 0 and stage > 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers).eval()


class PerturbLastStage(OnnxPassConverter):
    """Perturbs one weight of a convolution of the last stage."""

    name = "perturb-last-stage"
    libraries = ("onnxruntime",)
    distributions = ("onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: UpstreamOptions) -> onnx.ModelProto:
        tensor = [t for t in model.graph.initializer if len(t.dims) == 4][-2]
        array = numpy_helper.to_array(tensor).copy()
        array.flat[0] += 1.0
        tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
        return model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    module = resnet50_shaped()
    image = torch.randn(1, 3, 224, 224)
    user = UserModel(ModelKind.TORCH, "resnet50-shaped", (InputSlot("image", (1, 3, 224, 224), "float32"),),
                     (image.numpy(),), module=module)
    with library_output():
        run = CONVERTERS["torch-onnx-script"].convert(torch_source(user).source, None)
    folder = args.out or Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "resnet50.onnx"
    path.write_bytes(run.model)
    print(f"model: {path.stat().st_size / 1e6:.0f} MB, {sum(p.numel() for p in module.parameters()):,} weights")
    tool = PerturbLastStage()
    start = time.perf_counter()
    (result,) = check_model(load_model(str(path), 0), ConverterRegistry([tool]), (), 0)
    total = time.perf_counter() - start
    print(f"verdict {result.conversion.verdict.symptom.json_name}; check {total:.1f} s, of which locate, diagnose "
          f"and repair {result.repair_seconds:.1f} s")
    if result.repair is not None:
        print(result.repair.to_json())


if __name__ == "__main__":
    main()
