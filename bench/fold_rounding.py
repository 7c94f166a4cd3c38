"""How far a Conv+BatchNormalization fold in float16 moves the output, per tool, against the fold computed in float32
and rounded once to float16 (the `ideal` fold): the measurement behind docs/oracle.md's decision on fold rounding.

    python bench/fold_rounding.py [--models 40] [--seed 0]

Each model is Conv (8 channels in and out, 3x3, 16x16 input) then BatchNormalization, all float16, with the batch
norm's scale in [0.25, 4] and its variance in [1e-3, 1] (factors up to about 130). Every error is the largest
absolute difference from the float64 answer (the same float16 weights and input, computed in float64), over the
largest absolute value of that answer. Printed per tool: the median and the largest ratio of its error to the
ideal fold's, and of the unfolded model's."""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

EPS = 1e-5


def conv_bn(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One float16 Conv+BatchNormalization model and its parameters (as float16 arrays)."""
    params = {"w": rng.normal(0, 0.3, (8, 8, 3, 3)), "b": rng.normal(0, 0.3, 8),
              "scale": rng.uniform(0.25, 4, 8) * rng.choice([-1, 1], 8), "beta": rng.normal(0, 1, 8),
              "mean": rng.normal(0, 0.5, 8), "var": np.exp(rng.uniform(np.log(1e-3), 0, 8))}
    half = {k: v.astype(np.float16) for k, v in params.items()}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["y"], epsilon=EPS)]
    graph = helper.make_graph(nodes, "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT16,
                                                                               [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 8, 16, 16])],
                              [numpy_helper.from_array(v, k) for k, v in half.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), half


def reference(half: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The float64 answer of the float16 model's weights on `x`."""
    t = {k: torch.from_numpy(v.astype(np.float64)) for k, v in half.items()}
    c = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float64)), t["w"], t["b"], padding=1)
    shape = (1, -1, 1, 1)
    y = (c - t["mean"].view(shape)) / torch.sqrt(t["var"].view(shape) + EPS) * t["scale"].view(shape) + \
        t["beta"].view(shape)
    return y.numpy()


def ideal_fold(half: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The fold computed in float32 from the float16 parameters, each folded weight rounded once to float16."""
    f = {k: v.astype(np.float32) for k, v in half.items()}
    factor = f["scale"] / np.sqrt(f["var"] + np.float32(EPS))
    w = (f["w"] * factor[:, None, None, None]).astype(np.float16)
    b = ((f["b"] - f["mean"]) * factor + f["beta"]).astype(np.float16)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT16,
                                                                               [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 8, 16, 16])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def half_fold(half: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The fold computed in float16 arithmetic throughout (each step rounded), for comparison."""
    f = half
    factor = f["scale"] / np.sqrt(f["var"] + np.float16(EPS))
    w = (f["w"] * factor[:, None, None, None]).astype(np.float16)
    b = ((f["b"] - f["mean"]) * factor + f["beta"]).astype(np.float16)
    model = ideal_fold(half)
    del model.graph.initializer[:]
    model.graph.initializer.extend([numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return model


def folded(model: onnx.ModelProto | bytes) -> bool:
    """Whether no BatchNormalization is left."""
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)
    return all(n.op_type != "BatchNormalization" for n in proto.graph.node)


def run(model: onnx.ModelProto | bytes, x: np.ndarray, level: str = "disabled") -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def onnxoptimizer_fold(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxoptimizer

    return onnxoptimizer.optimize(model, ["fuse_bn_into_conv"])


def onnxsim_fold(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    return onnxsim.simplify(model, check_n=0)[0]


def onnxslim_fold(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(model)


def onnxscript_fold(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxscript.optimizer

    return onnxscript.optimizer.optimize(model)


def ort_fold(model: onnx.ModelProto) -> bytes:
    """ONNX Runtime's own optimized model at level all (what its session runs)."""
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(Path(folder) / "o.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return (Path(folder) / "o.onnx").read_bytes()


TOOLS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto | bytes]] = {
    "onnxoptimizer fuse_bn_into_conv": onnxoptimizer_fold, "onnxsim": onnxsim_fold, "onnxslim": onnxslim_fold,
    "onnxscript optimizer": onnxscript_fold, "ONNX Runtime (level all)": ort_fold}


def error(actual: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(actual.astype(np.float64) - ref)) / np.max(np.abs(ref)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ratios: dict[str, list[float]] = {name: [] for name in ("unfolded", "fold in float16 arithmetic", *TOOLS)}
    did: dict[str, int] = {name: 0 for name in TOOLS}
    ideal_errors = []
    for _ in range(args.models):
        model, half = conv_bn(rng)
        x = rng.normal(0, 1, (1, 8, 16, 16)).astype(np.float16)
        ref = reference(half, x)
        ideal = error(run(ideal_fold(half), x), ref)
        ideal_errors.append(ideal)
        ratios["unfolded"].append(error(run(model, x), ref) / ideal)
        ratios["fold in float16 arithmetic"].append(error(run(half_fold(half), x), ref) / ideal)
        for name, fold in TOOLS.items():
            made = fold(model)
            did[name] += folded(made)
            ratios[name].append(error(run(made, x), ref) / ideal)
    print(f"{args.models} models; the ideal fold's error (max abs / max |answer|): median "
          f"{statistics.median(ideal_errors):.2e}, largest {max(ideal_errors):.2e}")
    for name, values in ratios.items():
        print(f"  {name:<34} error / ideal fold's: median {statistics.median(values):5.2f}, "
              f"largest {max(values):5.2f}, above 2: {sum(v > 2 for v in values)}"
              + (f"; folded the batch norm in {did[name]} of {args.models}" if name in did else ""))


if __name__ == "__main__":
    main()
