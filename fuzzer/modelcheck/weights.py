"""An exporter's constants matched with the source model's weights, whatever the exporter did to them on the way: a
kernel moved to another axis order or reshaped (channels-first, a depthwise kernel), a batch norm folded into the
convolution before it (the caller adds the folded weights to the candidates). A constant that is mostly one candidate
in some layout, but not all of it, is a parameter fault, restored from that candidate."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from fuzzer.modelcheck.diagnose import FaultKind, Finding, constant_difference
from fuzzer.modelcheck.edits import RestoreConstant

# A constant is a candidate's when at least this share of its elements is close to the candidate's in some layout: a
# perturbed weight keeps most of them, an unrelated weight of the same shape almost none.
SAME_WEIGHT = 0.5


def layouts(weight: np.ndarray, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    """The weight in every axis order whose shape, or whose reshaping to `shape`, fits (a depthwise kernel's)."""
    if weight.ndim > 5 or weight.size != int(np.prod(shape)):
        return
    for perm in itertools.permutations(range(weight.ndim)):
        moved = np.transpose(weight, perm)
        yield moved if moved.shape == shape else moved.reshape(shape)


def closest(ours: np.ndarray, candidates: Sequence[np.ndarray]) -> tuple[float, np.ndarray | None]:
    """The candidate layout with the largest share of elements close to `ours`, and that share."""
    return max(((float(np.mean(np.isclose(c, ours, rtol=1e-4, atol=1e-6))), c)
                for w in candidates for c in layouts(w, ours.shape)), key=lambda p: p[0], default=(0.0, None))


def weight_findings(model: onnx.ModelProto, names: Sequence[str], candidates: Sequence[np.ndarray], where: str,
                    layer: str) -> list[Finding]:
    """The constants among `names` that are mostly, not wholly, one of the candidates: each restored from it."""
    inits = {t.name: t for t in model.graph.initializer}
    found = []
    for name in dict.fromkeys(names):
        if name not in inits or inits[name].data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE):
            continue
        ours = numpy_helper.to_array(inits[name])
        share, theirs = closest(ours, candidates)
        if theirs is None or share == 1.0 or share < SAME_WEIGHT:
            continue
        theirs = theirs.astype(ours.dtype)
        detail = constant_difference(name, theirs, ours) or f"constant {name} differs from the layer's weight"
        edit = RestoreConstant(name, numpy_helper.from_array(theirs, name).SerializeToString())
        found.append(Finding(FaultKind.PARAMETER, f"{detail} (layer {layer})", edit, where))
    return found


def fold_batch_norm(kernel: np.ndarray, bias: np.ndarray | None, gamma: np.ndarray, beta: np.ndarray,
                    mean: np.ndarray, variance: np.ndarray, epsilon: float, out_axis: int) -> list[np.ndarray]:
    """A convolution's kernel and bias with the batch norm after it folded in (float64 arithmetic, float32 out);
    `out_axis`: the kernel's output-channel axis (0 for PyTorch, the last for Keras)."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(variance, np.float64) + epsilon)
    shape = [1] * kernel.ndim
    shape[out_axis] = -1
    folded = np.asarray(kernel, np.float64) * scale.reshape(shape)
    shift = ((np.zeros_like(scale) if bias is None else np.asarray(bias, np.float64)) - mean) * scale + beta
    return [folded.astype(np.float32), shift.astype(np.float32)]
