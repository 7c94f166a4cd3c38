"""Small PyTorch models of the families real deployments hold beside CNNs and transformers: recurrent layers,
normalization variants, a detection head, a segmentation network and a quantized (QDQ) model."""

from __future__ import annotations

import torch
from torch import nn

from generators.zoo.spec import Family, ToleranceClass, image, sequence
from generators.zoo.torch_cnn import conv_bn
from generators.zoo.torch_entry import TorchEntry


class RecurrentClassifier(nn.Module):
    """A recurrent layer over a sequence, its last step through a linear head; returns every step and the logits."""

    def __init__(self, layer: nn.Module, width: int) -> None:
        super().__init__()
        self.layer, self.head = layer, nn.Linear(width, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        steps = self.layer(x)[0]
        return steps, self.head(steps[:, -1])


class Lstm(TorchEntry):
    name = "lstm"
    family = Family.RECURRENT
    summary = "two stacked LSTM layers (batch first) and a linear head on the last step"
    parameters = 3925
    inputs = (sequence("x", 8),)
    outputs = ("steps", "logits")
    tolerance = ToleranceClass.SHALLOW

    def module(self) -> nn.Module:
        return RecurrentClassifier(nn.LSTM(8, 16, num_layers=2, batch_first=True), 16)


class BidirectionalLstm(TorchEntry):
    name = "bilstm"
    family = Family.RECURRENT
    summary = "one bidirectional LSTM layer with projected hidden states (proj_size) and a linear head"
    parameters = 2305
    inputs = (sequence("x", 8),)
    outputs = ("steps", "logits")
    tolerance = ToleranceClass.SHALLOW

    def module(self) -> nn.Module:
        return RecurrentClassifier(nn.LSTM(8, 16, batch_first=True, bidirectional=True, proj_size=6), 12)


class Gru(TorchEntry):
    name = "gru"
    family = Family.RECURRENT
    summary = "two stacked GRU layers (sequence first) and a linear head on the last step"
    parameters = 2965
    inputs = (sequence("x", 8),)
    outputs = ("steps", "logits")
    tolerance = ToleranceClass.SHALLOW

    def module(self) -> nn.Module:
        return RecurrentClassifier(SequenceFirst(nn.GRU(8, 16, num_layers=2)), 16)


class SequenceFirst(nn.Module):
    """A sequence-first recurrent layer taking batch-first input (transposes on the way in and out)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.layer(x.transpose(0, 1))[0].transpose(0, 1),)


class NormCnn(nn.Module):
    """Convolutions each followed by another normalization: group, instance (affine, tracked statistics off) and
    layer norm over channels last."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.group = nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16)
        self.conv2, self.instance = nn.Conv2d(16, 16, 3, 2, 1), nn.InstanceNorm2d(16, affine=True)
        self.conv3, self.layer = nn.Conv2d(16, 8, 1), nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        x = nn.functional.silu(self.group(self.conv1(x)))
        x = nn.functional.gelu(self.instance(self.conv2(x)))
        return (self.layer(self.conv3(x).permute(0, 2, 3, 1)),)


class NormVariantsCnn(TorchEntry):
    name = "norm-cnn"
    family = Family.NORMALIZATION
    summary = "convolutions with group norm, affine instance norm and channels-last layer norm"
    parameters = 2984
    inputs = (image(size=16),)
    outputs = ("features",)

    def module(self) -> nn.Module:
        return NormCnn()


class NormMlp(nn.Module):
    """A residual MLP over tokens with RMSNorm, a LayerNorm without bias, and BatchNorm1d over the features."""

    def __init__(self) -> None:
        super().__init__()
        self.rms, self.up, self.down = nn.RMSNorm(16, eps=1e-6), nn.Linear(16, 32), nn.Linear(32, 16)
        self.layer, self.batch = nn.LayerNorm(16, bias=False), nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        x = x + self.down(nn.functional.silu(self.up(self.rms(x))))
        return (self.batch(self.layer(x).transpose(1, 2)).transpose(1, 2),)


class NormVariantsMlp(TorchEntry):
    name = "norm-mlp"
    family = Family.NORMALIZATION
    summary = "a residual MLP block with RMSNorm, bias-free LayerNorm and BatchNorm1d"
    parameters = 1136
    inputs = (sequence("x", 16),)
    outputs = ("features",)
    tolerance = ToleranceClass.SHALLOW

    def module(self) -> nn.Module:
        return NormMlp()


class AnchorFreeDetector(nn.Module):
    """An FCOS-style detector: a strided backbone, a two-level feature pyramid, and a head shared across levels
    with class scores, centerness and boxes decoded from the grid points (exp of distances, scaled by stride)."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.c3, self.c4 = nn.Sequential(conv_bn(3, 8, 3, 2), conv_bn(8, 16, 3, 2)), conv_bn(16, 32, 3, 2)
        self.lat3, self.lat4 = nn.Conv2d(16, 16, 1), nn.Conv2d(32, 16, 1)
        self.tower = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU())
        self.cls, self.box, self.ctr = nn.Conv2d(16, classes, 3, padding=1), nn.Conv2d(16, 4, 3, padding=1), \
            nn.Conv2d(16, 1, 3, padding=1)
        self.scales = nn.Parameter(torch.tensor([1.0, 0.5]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f3 = self.c3(x)
        f4 = self.lat4(self.c4(f3))
        p3 = self.lat3(f3) + nn.functional.interpolate(f4, scale_factor=2.0, mode="nearest")
        scores, boxes = [], []
        for level, (feature, stride) in enumerate(((p3, 4), (f4, 8))):
            t = self.tower(feature)
            score = torch.sigmoid(self.cls(t)) * torch.sigmoid(self.ctr(t))
            scores.append(score.flatten(2).transpose(1, 2))
            boxes.append(decode(torch.exp(self.box(t) * self.scales[level]) * stride, stride))
        return torch.cat(scores, 1), torch.cat(boxes, 1)


def decode(distances: torch.Tensor, stride: int) -> torch.Tensor:
    """(left, top, right, bottom) distances at each grid point to (x1, y1, x2, y2) boxes, one row per point."""
    height, width = distances.shape[-2:]
    ys = (torch.arange(height, dtype=distances.dtype) + 0.5) * stride
    xs = (torch.arange(width, dtype=distances.dtype) + 0.5) * stride
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    points = torch.stack([gx, gy, gx, gy]).unsqueeze(0)
    signs = torch.tensor([-1.0, -1.0, 1.0, 1.0], dtype=distances.dtype).view(1, 4, 1, 1)
    return (points + signs * distances).flatten(2).transpose(1, 2)


class Detector(TorchEntry):
    name = "fcos-head"
    family = Family.DETECTION
    summary = "FCOS-style anchor-free detection: feature pyramid, shared head, boxes decoded from grid points"
    parameters = 10547
    inputs = (image(),)
    outputs = ("scores", "boxes")

    def module(self) -> nn.Module:
        return AnchorFreeDetector()


class UNet(nn.Module):
    """A two-level U-Net: convolutions, max pooling, transposed-convolution upsampling, skips concatenated, and
    per-pixel class logits."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.down1, self.down2 = conv_bn(3, 8), conv_bn(8, 16)
        self.bottom = conv_bn(16, 32)
        self.up2, self.dec2 = nn.ConvTranspose2d(32, 16, 2, 2), conv_bn(32, 16)
        self.up1, self.dec1 = nn.ConvTranspose2d(16, 8, 2, 2), conv_bn(16, 8)
        self.out = nn.Conv2d(8, classes, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        d1 = self.down1(x)
        d2 = self.down2(nn.functional.max_pool2d(d1, 2))
        b = self.bottom(nn.functional.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], 1))
        return (self.out(self.dec1(torch.cat([self.up1(u2), d1], 1))),)


class UNetEntry(TorchEntry):
    name = "unet"
    family = Family.SEGMENTATION
    summary = "two-level U-Net: max pooling down, transposed convolutions up, concatenated skips"
    parameters = 14507
    inputs = (image(size=16),)
    outputs = ("logits",)

    def module(self) -> nn.Module:
        return UNet()


class QdqCnn(nn.Module):
    """A statically quantized CNN as ONNX holds one (QDQ): int8 weights per output channel, uint8 activations per
    tensor, each quantized and dequantized in place (fake quantization), so exporters write QuantizeLinear and
    DequantizeLinear pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, 2, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        x = activation_qdq(x, 0.05, 128)
        x = activation_qdq(torch.relu(qdq_conv(self.conv1, x)), 0.04, 0)
        x = activation_qdq(torch.relu(qdq_conv(self.conv2, x)), 0.04, 0)
        x = activation_qdq(x.mean((2, 3)), 0.02, 0)
        return (nn.functional.linear(x, weight_qdq(self.fc.weight), self.fc.bias),)


def activation_qdq(x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, 0, 255)


def weight_qdq(w: torch.Tensor) -> torch.Tensor:
    """Symmetric int8 per output channel, the scale from each channel's largest magnitude."""
    scale = w.detach().abs().flatten(1).amax(1).clamp_min(1e-8) / 127.0
    zero = torch.zeros(w.shape[0], dtype=torch.int32)
    return torch.fake_quantize_per_channel_affine(w, scale, zero, 0, -128, 127)


def qdq_conv(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    return nn.functional.conv2d(x, weight_qdq(conv.weight), conv.bias, conv.stride, conv.padding)


class QuantizedCnn(TorchEntry):
    name = "qdq-cnn"
    family = Family.QUANTIZED
    summary = "statically quantized CNN in QDQ form: int8 per-channel weights, uint8 per-tensor activations"
    parameters = 1562
    inputs = (image(size=16),)
    outputs = ("logits",)
    tolerance = ToleranceClass.QUANTIZED

    def module(self) -> nn.Module:
        return QdqCnn()


ENTRIES = [Lstm, BidirectionalLstm, Gru, NormVariantsCnn, NormVariantsMlp, Detector, UNetEntry, QuantizedCnn]
