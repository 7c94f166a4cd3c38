"""Vision models from `transformers` configs at tiny sizes: vision transformers, a modern CNN, and segmentation and
detection heads."""

from __future__ import annotations

from typing import Any

import torch

from generators.zoo.spec import Family, image
from generators.zoo.torch_entry import TransformersEntry

# Two layers, hidden size 32 over four heads, 4x4 patches of a 32x32 image.
VIT: dict[str, Any] = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                       "image_size": 32, "patch_size": 4, "num_channels": 3}


class Vit(TransformersEntry):
    name = "vit"
    family = Family.VISION_TRANSFORMER
    summary = "ViT: patch embedding by strided convolution, class token, learned positions, pre-norm encoder"
    parameters = 21888
    inputs = (image(),)
    outputs = ("last_hidden_state", "pooler_output")

    def make(self, transformers: Any) -> torch.nn.Module:
        return transformers.ViTModel(transformers.ViTConfig(**VIT))


class Deit(TransformersEntry):
    name = "deit"
    family = Family.VISION_TRANSFORMER
    summary = "DeiT: ViT with a distillation token beside the class token, both heads averaged"
    parameters = 21556
    inputs = (image(),)
    outputs = ("logits",)

    def make(self, transformers: Any) -> torch.nn.Module:
        return transformers.DeiTForImageClassificationWithTeacher(transformers.DeiTConfig(**VIT, num_labels=10))


class Swin(TransformersEntry):
    name = "swin"
    family = Family.VISION_TRANSFORMER
    summary = "Swin: shifted-window attention with relative position bias, patch merging between stages"
    parameters = 24604
    inputs = (image(),)
    outputs = ("last_hidden_state", "pooler_output")

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                         window_size=4, mlp_ratio=2.0)
        return transformers.SwinModel(config)


class ConvNext(TransformersEntry):
    name = "convnext"
    family = Family.VISION_CNN
    summary = "ConvNeXt: 7x7 depthwise convolutions, channels-last layer norm, layer scale, patchify stem"
    parameters = 5106
    inputs = (image(),)
    outputs = ("logits",)

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2,
                                             num_labels=10, layer_scale_init_value=0.5)
        return transformers.ConvNextForImageClassification(config)


class Segformer(TransformersEntry):
    name = "segformer"
    family = Family.SEGMENTATION
    summary = "SegFormer: overlapping patch embeddings, efficient (reduced key) attention, all-MLP decode head"
    parameters = 7043
    inputs = (image(),)
    outputs = ("logits",)

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1],
                                              sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3],
                                              strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                                              decoder_hidden_size=16, num_labels=3)
        return transformers.SegformerForSemanticSegmentation(config)


class Yolos(TransformersEntry):
    name = "yolos"
    family = Family.DETECTION
    summary = "YOLOS: a ViT with detection tokens, class logits and sigmoid boxes from MLP heads"
    parameters = 27784
    inputs = (image(),)
    outputs = ("logits", "pred_boxes")

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.YolosConfig(**{**VIT, "image_size": [32, 32]}, num_detection_tokens=4, num_labels=3)
        return transformers.YolosForObjectDetection(config)


ENTRIES = [Vit, Deit, Swin, ConvNext, Segformer, Yolos]
