"""Vision CNNs written from torch.nn at small widths: the PyTorch counterparts of the Keras applications
(MobileNetV2, ResNet, InceptionV3), block for block as their papers describe them (torchvision, whose definitions
these follow in structure, cannot be imported beside the CPU build of torch)."""

from __future__ import annotations

import torch
from torch import nn

from generators.zoo.spec import Family, image
from generators.zoo.torch_entry import TorchEntry

CLASSES = 10


def conv_bn(cin: int, cout: int, kernel: int | tuple[int, int] = 3, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    """Convolution without bias, batch norm, then the activation (none where `act` is None)."""
    pad = (kernel // 2) if isinstance(kernel, int) else (kernel[0] // 2, kernel[1] // 2)
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, pad, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act()] if act is not None else []))


class Classifier(nn.Module):
    """Features, global average pooling and a linear head: returns the logits as a one-tuple."""

    def __init__(self, features: nn.Module, width: int) -> None:
        super().__init__()
        self.features, self.head = features, nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)),)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, linear 1x1 projection; a residual where shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1, act=nn.ReLU6)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6), conv_bn(hidden, cout, 1, act=None)]
        self.block, self.residual = nn.Sequential(*layers), stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV2(TorchEntry):
    name = "mobilenet-v2"
    family = Family.VISION_CNN
    summary = "MobileNetV2: inverted residuals, depthwise convolutions, ReLU6, batch norm"
    parameters = 19482
    inputs = (image(),)
    outputs = ("logits",)

    def module(self) -> nn.Module:
        layers: list[nn.Module] = [conv_bn(3, 8, 3, 2, act=nn.ReLU6)]
        cin = 8
        for expand, cout, repeats, stride in ((1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1)):
            for i in range(repeats):
                layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers.append(conv_bn(cin, 64, 1, act=nn.ReLU6))
        return Classifier(nn.Sequential(*layers), 64)


class BasicBlock(nn.Module):
    """ResNet-18's block: two 3x3 convolutions and a shortcut (a strided 1x1 projection where shapes change)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, act=None))
        self.shortcut = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class Bottleneck(nn.Module):
    """ResNet-50's block: 1x1 reduction, strided 3x3, 1x1 expansion by four, and a shortcut."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                  conv_bn(width, cout, 1, act=None))
        self.shortcut = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet_stem() -> nn.Sequential:
    """7x7 strided convolution and 3x3 strided max pooling."""
    return nn.Sequential(conv_bn(3, 8, 7, 2), nn.MaxPool2d(3, 2, 1))


class ResNet(TorchEntry):
    name = "resnet"
    family = Family.VISION_CNN
    summary = "ResNet-18 layout at widths 8-64: basic blocks, projection shortcuts, max pooling stem"
    parameters = 78962
    inputs = (image(),)
    outputs = ("logits",)

    def module(self) -> nn.Module:
        blocks, cin = [], 8
        for cout, stride in ((8, 1), (16, 2), (32, 2), (64, 2)):
            blocks.append(BasicBlock(cin, cout, stride))
            cin = cout
        return Classifier(nn.Sequential(resnet_stem(), *blocks), cin)


class ResNetBottleneck(TorchEntry):
    name = "resnet-bottleneck"
    family = Family.VISION_CNN
    summary = "ResNet-50 layout at widths 4-32: bottleneck blocks with four-fold expansion"
    parameters = 34962
    inputs = (image(),)
    outputs = ("logits",)

    def module(self) -> nn.Module:
        blocks, cin = [], 8
        for width, stride in ((4, 1), (8, 2), (16, 2), (32, 2)):
            blocks.append(Bottleneck(cin, width, stride))
            cin = width * 4
        return Classifier(nn.Sequential(resnet_stem(), *blocks), cin)


class InceptionA(nn.Module):
    """InceptionV3's first mixed block: 1x1, 5x5, double 3x3 and pooled branches, concatenated."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.b1 = conv_bn(cin, 8, 1)
        self.b5 = nn.Sequential(conv_bn(cin, 6, 1), conv_bn(6, 8, 5))
        self.b3 = nn.Sequential(conv_bn(cin, 8, 1), conv_bn(8, 12, 3), conv_bn(12, 12, 3))
        self.pool = conv_bn(cin, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.pool(nn.functional.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), pooled], 1)


class InceptionReduce(nn.Module):
    """InceptionV3's grid reduction: a strided 3x3, a strided double 3x3 and a max pool side by side."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.b3 = conv_bn(cin, 16, 3, 2)
        self.dbl = nn.Sequential(conv_bn(cin, 8, 1), conv_bn(8, 12, 3), conv_bn(12, 12, 3, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b3(x), self.dbl(x), nn.functional.max_pool2d(x, 3, 2, 1)], 1)


class InceptionC(nn.Module):
    """InceptionV3's factorized block: 7x7 convolutions as 1x7 then 7x1."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.b1 = conv_bn(cin, 12, 1)
        self.b7 = nn.Sequential(conv_bn(cin, 8, 1), conv_bn(8, 8, (1, 7)), conv_bn(8, 12, (7, 1)))
        self.pool = conv_bn(cin, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b7(x), self.pool(nn.functional.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionV3(TorchEntry):
    name = "inception-v3"
    family = Family.VISION_CNN
    summary = "InceptionV3 layout: mixed blocks with 5x5, double 3x3, factorized 1x7/7x1 and pooled branches"
    parameters = 16246
    inputs = (image(size=48),)
    outputs = ("logits",)

    def module(self) -> nn.Module:
        stem = nn.Sequential(conv_bn(3, 8, 3, 2), conv_bn(8, 8, 3), conv_bn(8, 16, 3), nn.MaxPool2d(3, 2, 1))
        # InceptionA gives 8+8+12+4 = 32 channels; the reduction 16+12+32 = 60; InceptionC 12+12+8 = 32.
        return Classifier(nn.Sequential(stem, InceptionA(16), InceptionReduce(32), InceptionC(60)), 32)


ENTRIES = [MobileNetV2, ResNet, ResNetBottleneck, InceptionV3]
