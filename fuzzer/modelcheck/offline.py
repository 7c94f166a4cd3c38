"""onnx2tf offline: for a model whose inputs all look like NHWC images (a Keras model's do), onnx2tf downloads sample
images from GitHub for its own check inference, unless the file is in the working directory. With no network the
conversion fails before it starts, so onnx2tf runs in a folder holding images of that file's shape drawn from a
fixed seed (its check only needs values of that range)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

# The file onnx2tf 1.x looks for in the working directory before it downloads it (download_test_image_data).
SAMPLE_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"
SAMPLE_SHAPE = (20, 128, 128, 3)


@contextlib.contextmanager
def sample_images_here() -> Iterator[Path]:
    """A working directory, for the block, that holds onnx2tf's sample images (uniform in [0, 1), seed 0)."""
    previous = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="convsmith-onnx2tf-samples-") as folder:
        images = np.random.default_rng(0).random(SAMPLE_SHAPE, dtype=np.float32)
        np.save(Path(folder) / SAMPLE_FILE, images)
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(previous)
