"""Keras models through `tf_keras`: the three applications Fix-Con evaluated (MobileNetV2, ResNet50, InceptionV3)
built with `weights=None` at small input sizes, and a recurrent model. Keras draws the initial weights from
TensorFlow's global generator, so every weight is then drawn again from the entry's seed at the scale Keras chose
for it (a constant, such as a batch norm's scale or variance, is moved a little off its value)."""

from __future__ import annotations

from typing import Any

import numpy as np

from generators.zoo.entry import ZooEntry
from generators.zoo.spec import Family, Framework, InputSpec, ToleranceClass, image, sequence


class KerasEntry(ZooEntry):
    """An entry built as a Keras model taking the inputs in order and returning one tensor."""

    framework = Framework.KERAS
    requires = ("tf_keras",)

    def build_model(self, seed: int) -> Any:
        import tf_keras

        model = self.make(tf_keras)
        rng = np.random.default_rng([seed, 3])
        model.set_weights([redraw(w, rng) for w in model.get_weights()])
        return model

    def make(self, tf_keras: Any) -> Any:
        raise NotImplementedError

    def parameter_count(self, model: Any) -> int:
        return int(model.count_params())


def redraw(weight: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A weight drawn again: normal at its mean and spread, or a constant moved by up to a tenth (kept positive
    where it was, for a variance)."""
    spread = float(weight.std())
    if spread > 0:
        return rng.normal(float(weight.mean()), spread, weight.shape).astype(weight.dtype)
    moved = weight * rng.uniform(0.9, 1.1, weight.shape) + rng.uniform(-0.01, 0.01, weight.shape)
    return np.where(weight > 0, np.abs(moved), moved).astype(weight.dtype)


def keras_image(size: int) -> InputSpec:
    return image("input", size=size, last=True)


class KerasMobileNetV2(KerasEntry):
    name = "keras-mobilenet-v2"
    family = Family.VISION_CNN
    summary = "tf_keras.applications.MobileNetV2 (alpha 0.35) at 32x32, logits"
    parameters = 423018
    inputs = (keras_image(32),)
    outputs = ("predictions",)

    def make(self, tf_keras: Any) -> Any:
        return tf_keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10,
                                                 classifier_activation=None)


class KerasResNet50(KerasEntry):
    name = "keras-resnet50"
    family = Family.VISION_CNN
    summary = "tf_keras.applications.ResNet50 at 32x32, logits"
    parameters = 23608202
    inputs = (keras_image(32),)
    outputs = ("predictions",)

    def make(self, tf_keras: Any) -> Any:
        return tf_keras.applications.ResNet50(input_shape=(32, 32, 3), weights=None, classes=10,
                                              classifier_activation=None)


class KerasInceptionV3(KerasEntry):
    name = "keras-inception-v3"
    family = Family.VISION_CNN
    summary = "tf_keras.applications.InceptionV3 at 75x75 (its smallest input), logits"
    parameters = 21823274
    inputs = (keras_image(75),)
    outputs = ("predictions",)

    def make(self, tf_keras: Any) -> Any:
        return tf_keras.applications.InceptionV3(input_shape=(75, 75, 3), weights=None, classes=10,
                                                 classifier_activation=None)


class KerasLstm(KerasEntry):
    name = "keras-lstm"
    family = Family.RECURRENT
    summary = "tf_keras LSTM (all steps) into a GRU (last step) and a dense head"
    parameters = 2745
    inputs = (sequence("x", 8),)
    outputs = ("logits",)
    tolerance = ToleranceClass.SHALLOW

    def make(self, tf_keras: Any) -> Any:
        layers = tf_keras.layers
        x = layers.Input((6, 8), name="x")
        hidden = layers.GRU(12)(layers.LSTM(16, return_sequences=True)(x))
        return tf_keras.Model(x, layers.Dense(5)(hidden))


ENTRIES = [KerasMobileNetV2, KerasResNet50, KerasInceptionV3, KerasLstm]
