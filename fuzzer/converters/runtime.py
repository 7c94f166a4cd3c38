"""Validate and run ONNX models in ONNX Runtime, and the shared "ONNX model vs source" target step.

bfloat16 has no numpy dtype ORT accepts: inputs go in as OrtValues built from the raw 16-bit words, and
bfloat16 outputs are read from the OrtValue's buffer and widened to float32 storage (exact), which is how the
oracle stores bfloat16.
"""

from __future__ import annotations

import ctypes
import functools
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.ort_levels import ORT_LEVEL_MEMBERS
from fuzzer.support.pybind_internals import own_pybind11_internals
from fuzzer.support.quiet import library_output
from oracles.verdict import Stage

with own_pybind11_internals("onnxruntime"):  # else its exception translators slow torch's exporters down
    import onnxruntime as ort

SESSION_LEVELS: Mapping[str, ort.GraphOptimizationLevel] = {
    name: getattr(ort.GraphOptimizationLevel, member) for name, member in ORT_LEVEL_MEMBERS.items()}

ORT_TYPE_TO_IR = {
    "tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
    "tensor(bfloat16)": "bfloat16", "tensor(int32)": "int32", "tensor(int64)": "int64", "tensor(int8)": "int8",
    "tensor(uint8)": "uint8", "tensor(bool)": "bool",
}


def validate(model: onnx.ModelProto) -> None:
    """onnx.checker (full) and strict shape inference with type checks; raises what they raise (a value declared
    without a shape with the op type of the node that makes it, which the checker's words leave out). Without
    ONNX's data propagation: its errors are ONNX's own on models the checker and inference accept, not the
    converter's, and a model wrong in a way only it sees still fails at the runtime."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as exc:
        producer = shapeless_producer(model) if MISSING_SHAPE in str(exc) else ""
        if not producer:
            raise
        raise onnx.checker.ValidationError(f"{exc}\n(failing node: op_type={producer})") from None
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


MISSING_SHAPE = "Field 'shape' of 'type' is required but missing"


def shapeless_producer(model: onnx.ModelProto) -> str:
    """The op type of the first node whose output is declared (value_info or graph output) as a tensor without a
    shape; "" when none is."""
    graph = model.graph
    shapeless = {v.name for v in (*graph.value_info, *graph.output)
                 if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape")}
    return next((n.op_type for n in graph.node if shapeless.intersection(n.output)), "")


def providers_for(device: str) -> list[str | tuple[str, dict[str, str]]]:
    """ONNX Runtime's execution providers for a device: CUDA first, in full float32 (nodes it lacks kernels for
    fall back to the CPU, as in any ORT deployment), or the CPU alone."""
    if device == "cuda":
        # TF32, on by default in ORT's CUDA provider, rounds float32 products to 10 bits of mantissa: the float32
        # tolerances would read that as divergences from the source, which runs without it (float32_without_tf32).
        return [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    if device == "cpu":
        return ["CPUExecutionProvider"]
    raise ValueError(f"unknown device {device!r} (cpu or cuda)")


def free_dimension_sizes(model: bytes, names: Sequence[str], inputs: Sequence[torch.Tensor]) -> dict[str, int]:
    """Each named (symbolic) dimension of the model's inputs and its size in `inputs` (by input name, else by
    position): what a deployment fixes with SessionOptions.add_free_dimension_override_by_name."""
    graph = onnx.load_from_string(model).graph
    initializers = {t.name for t in graph.initializer}
    declared = [i for i in graph.input if i.name not in initializers]
    by_name = dict(zip(names, inputs, strict=True))
    given = [by_name[i.name] for i in declared] if all(i.name in by_name for i in declared) else list(inputs)
    sizes: dict[str, int] = {}
    for value, tensor in zip(declared, given, strict=False):
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.dim_param and k < tensor.dim():
                sizes.setdefault(dim.dim_param, int(tensor.shape[k]))
    return sizes


def symbolic_inputs(model: bytes) -> bytes:
    """The model with every dimension of its inputs named (`in<i>_<k>`) and the shapes it recorded for its
    intermediate values dropped: the model a dynamic export makes, for a session to fix again by name."""
    proto = onnx.load_from_string(model)
    initializers = {t.name for t in proto.graph.initializer}
    declared = [i for i in proto.graph.input if i.name not in initializers]
    for i, value in enumerate(declared):
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"in{i}_{k}"  # clears dim_value: the two are a oneof
    del proto.graph.value_info[:]
    return proto.SerializeToString()


def _session_options(level: str, free_dims: Mapping[str, int]) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = SESSION_LEVELS[level]
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    for name, size in free_dims.items():
        options.add_free_dimension_override_by_name(name, size)
    return options


def make_session(model: bytes, level: str = "disabled", disabled_optimizers: Sequence[str] = (),
                 device: str = "cpu", free_dims: Mapping[str, int] | None = None) -> ort.InferenceSession:
    """A session at an optimization level (disabled, basic, extended, all) on `device`, one CPU thread for
    determinism; `free_dims` fixes named input dimensions to sizes."""
    options = _session_options(level, free_dims or {})
    options.log_severity_level = 3
    return ort.InferenceSession(
        model, options, providers=providers_for(device), disabled_optimizers=list(disabled_optimizers) or None
    )


_MODIFIED = re.compile(r"GraphTransformer (\S+) modified: 1")
# A transformer the log names: those of the optimization levels, and those run after partitioning (casts, copies).
_APPLIED = re.compile(r"Applying graph transformer (\S+) on step|GraphTransformer (\S+) modified: [01]")


def optimized_model(model: bytes, level: str, disabled_optimizers: Sequence[str] = ()) -> bytes:
    """The model as ONNX Runtime's optimizations at `level` leave it on the CPU (its optimized_model_filepath)."""
    with tempfile.TemporaryDirectory(prefix="convsmith-ort-") as folder:
        options = _session_options(level, {})
        options.log_severity_level = 3
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        ort.InferenceSession(model, options, providers=providers_for("cpu"),
                             disabled_optimizers=list(disabled_optimizers) or None)
        return (Path(folder) / "optimized.onnx").read_bytes()


def logged_session(model: bytes, level: str, device: str = "cpu", disabled_optimizers: Sequence[str] = (),
                   free_dims: Mapping[str, int] | None = None, optimized_path: str = "") -> tuple[
                       ort.InferenceSession, tuple[str, ...]]:
    """A session like make_session's, and the graph transformers that modified the model while it was made (from
    ONNX Runtime's own log, captured off the terminal); the optimized model written to `optimized_path` where
    given."""
    options = _session_options(level, free_dims or {})
    options.log_severity_level = 1  # info: each transformer's "modified" line
    if optimized_path:
        options.optimized_model_filepath = optimized_path
    with library_output() as captured:
        session = ort.InferenceSession(model, options, providers=providers_for(device),
                                       disabled_optimizers=list(disabled_optimizers) or None)
    return session, tuple(dict.fromkeys(_MODIFIED.findall(captured.text)))


@functools.cache
def graph_transformers(device: str = "cpu") -> tuple[str, ...]:
    """Every graph transformer the installed ONNX Runtime applies up to its highest level and after partitioning,
    as its verbose log names them on a one-node model (the list a new release's transformers show up in)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    options = ort.SessionOptions()
    options.graph_optimization_level = SESSION_LEVELS["all"]
    options.log_severity_level, options.log_verbosity_level = 0, 1
    with library_output() as captured:
        ort.InferenceSession(model, options, providers=providers_for(device))
    return tuple(dict.fromkeys(a or b for a, b in _APPLIED.findall(captured.text)))


def to_ort_value(x: torch.Tensor) -> ort.OrtValue:
    x = x.detach().cpu().contiguous()  # ORT copies host inputs to its device
    if x.dtype == torch.bfloat16:
        words = x.view(torch.int16).numpy().view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(x.numpy())


def from_ort_value(value: ort.OrtValue) -> tuple[np.ndarray, str]:
    """An output as numpy (bfloat16 widened to float32) and its IR dtype name ('?' for types we do not make)."""
    kind = value.data_type()
    ir = ORT_TYPE_TO_IR.get(kind, f"?{kind}")
    if kind != "tensor(bfloat16)":
        return value.numpy(), ir
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    words = np.frombuffer(raw, dtype=np.uint16).reshape(value.shape())
    return (words.astype(np.uint32) << 16).view(np.float32), ir


def feed(session: ort.InferenceSession, names: Sequence[str], inputs: Sequence[torch.Tensor]) -> dict[str, Any]:
    """Inputs by the session's names: by IR name when they match, else by position (exporters may rename)."""
    wanted = [i.name for i in session.get_inputs()]
    by_name = dict(zip(names, inputs, strict=True))
    if all(n in by_name for n in wanted):
        return {n: to_ort_value(by_name[n]) for n in wanted}
    if len(wanted) != len(inputs):
        raise ValueError(f"model inputs {wanted} match neither the names nor the count of {list(names)}")
    return {n: to_ort_value(x) for n, x in zip(wanted, inputs, strict=True)}


def run_session(session: ort.InferenceSession, names: Sequence[str], inputs: Sequence[torch.Tensor]) -> tuple[
        tuple[np.ndarray, ...], tuple[str, ...]]:
    values = session.run_with_ort_values(None, feed(session, names, inputs))
    pairs = [from_ort_value(v) for v in values]
    return tuple(a for a, _ in pairs), tuple(d for _, d in pairs)


def run_model(model: bytes, source: Source, steps: Steps, level: str = "disabled",
              load_stage: Stage = Stage.RUNTIME_LOAD, disabled_optimizers: Sequence[str] = (),
              names: Sequence[str] | None = None) -> tuple[tuple[np.ndarray, ...], tuple[str, ...]]:
    """Load (tagged `load_stage`: graph optimization when optimizers run at load) and run one model, its inputs fed
    by `names` (the source's by default)."""
    with steps.at(load_stage, "runtime_load"):
        session = make_session(model, level, disabled_optimizers, source.device)
    with steps.at(Stage.RUNTIME_EXECUTION, "runtime"):
        return run_session(session, source.input_names if names is None else names, source.inputs)


def graph_inputs(model: onnx.ModelProto) -> list[str]:
    """The model's inputs that take data: tf2onnx lists its initializers among the graph's inputs too."""
    constants = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in constants]


def declared_input_names(model: onnx.ModelProto, source: Source) -> tuple[str, ...]:
    """The names a model made from `model` is fed by: the source's, unless `model` renamed its inputs (the dynamo
    exporter writes an input that is also an output as `<name>_orig`) and was fed by position; then its own, in
    order. An ONNX tool that drops an unused input of such a model is then still fed by name."""
    declared = tuple(graph_inputs(model))
    if set(declared) <= set(source.input_names) or len(declared) != len(source.inputs):
        return source.input_names
    return declared


def check_and_serialize(model: onnx.ModelProto, steps: Steps, checked: bool = True) -> bytes:
    """Serialize (and reparse, which catches protos that do not round-trip), then validate where `checked`
    (Converter.onnx_checked)."""
    with steps.at(Stage.SERIALIZATION, "serialization"):
        data = model.SerializeToString()
        reparsed = onnx.load_from_string(data)
    steps.model = data
    if not checked:
        return data
    with steps.at(Stage.VALIDATION, "validation"):
        validate(reparsed)
    return data


def run_onnx_target(model: onnx.ModelProto | bytes, source: Source, steps: Steps | None = None,
                    checked: bool = True, names: Sequence[str] | None = None) -> TargetRun:
    """The shared target step: check (where `checked`), serialize, run with optimizations off, inputs fed by `names`
    (the source's by default). Fault injection calls this too."""
    steps = steps or Steps()
    proto = model if isinstance(model, onnx.ModelProto) else _parse(model, steps)
    data = check_and_serialize(proto, steps, checked)
    outputs, dtypes = run_model(data, source, steps, names=names)
    return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


def _parse(data: bytes, steps: Steps) -> onnx.ModelProto:
    with steps.at(Stage.SERIALIZATION, "serialization"):
        return onnx.load_from_string(data)

