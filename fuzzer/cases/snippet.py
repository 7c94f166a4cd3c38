"""The few lines of a report that show a bug on their own: the graph as a torch module (or the ONNX model an
ONNX-to-ONNX converter received), the converter's call, and the check that fails (the library's own exception, or
numpy's assertion with expected beside observed). Small tensors are written inline; larger ones are read from the
case folder's TensorProto files. A dynamic export marks its dims in the call; a bug it shows at its second shape runs
the model at that shape's inputs. repro.py stays the complete harness."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fuzzer.cases import snippet_bf16 as bf16
from fuzzer.cases.repro import identifier, render_module
from fuzzer.cases.snippet_openvino import openvino_onnx_snippet, openvino_torch_snippet
from fuzzer.cases.snippet_tf import onnx2tf_snippet, tf2onnx_snippet
from fuzzer.converters import CONVERTERS
from fuzzer.converters.capabilities import snippet_of
from fuzzer.converters.describe import Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.openvino_cpu import computed_in
from fuzzer.converters.ort_levels import ORT_LEVEL_MEMBERS
from fuzzer.converters.role import Role
from oracles.compare import DEFAULT_TOLERANCES
from oracles.dynamic import at_second_shape
from oracles.verdict import Stage

INLINE_ELEMENTS = 16  # a tensor this small is written into the snippet
CHECKER = ("onnx.checker.check_model(model, full_check=True)",
           "onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)")


def render_snippet(case: Any) -> str | None:
    """The snippet of a CaseData, or None where it cannot be short (bfloat16 fed to ONNX Runtime, a converter with
    no snippet) or the case holds no tensors (a worker died before it could save them)."""
    converter = CONVERTERS.get(case.converter)
    has_data = len(case.inputs) == len(case.graph.inputs) and set(case.weights) == set(case.graph.weights)
    if converter is not None and has_data and (converter.framework == "tensorflow" or
                                               converter.runtime == "tensorflow"):
        return _tensorflow_family(case, converter)
    if converter is not None and has_data and converter.runtime == "openvino":
        return _openvino(case, converter)
    if converter is None or not has_data or converter.runtime != "onnxruntime":
        return None  # the few lines run the target in ONNX Runtime: another runtime's case has repro.py only
    # Only an exporter's case records dynamic dims (the ONNX tools' snippets take none).
    dynamic = (DynamicAxes.from_json(case.dynamic),) if case.dynamic is not None else ()
    call = snippet_of(converter, converter.options(case.converter_options), *dynamic)
    if call is None:
        return None
    # A conversion's crash raises before ONNX Runtime runs, an invalid model at the check: their snippets run none.
    # Where the call is a session's optimization level (ONNX Runtime's optimizer), graph optimization is that run.
    before = (Stage.CAPTURE, Stage.NODE_CONVERSION, Stage.VALIDATION, Stage.SERIALIZATION,
              *(() if call.level != "disabled" else (Stage.GRAPH_OPTIMIZATION,)))
    runs_ort = case.verdict.stage not in before or case.verdict.symptom.is_divergence
    if converter.role.starts_upstream and case.upstream_model is not None:
        return _from_upstream(case, call, runs_ort)
    if not call.from_torch:
        exporter = CONVERTERS.get(case.converter_options.get("upstream", ""))
        if exporter is None or exporter.role is not Role.EXPORTER:
            return None  # a native model is shown from its saved upstream.onnx only: no exporter makes it
        upstream = snippet_of(exporter, exporter.options({"opset": case.converter_options.get("opset", 17)}))
        if upstream is None:
            return None
        call = Snippet(upstream.imports + call.imports, upstream.lines + call.lines, call.level, True, call.free_dims)
    return _from_torch(case, call, runs_ort)


def _tensorflow_family(case: Any, converter: Any) -> str | None:
    """tf2onnx's snippet (from TensorFlow) or onnx2tf's (run in TensorFlow): fuzzer/cases/snippet_tf.py; None for
    onnx2tf with bfloat16 tensors, which TFLite has no type for."""
    bfloat16 = any(x.dtype.name == "bfloat16" for x in (*case.inputs, *case.weights.values()))
    call = snippet_of(converter, converter.options(case.converter_options))
    if call is None or (bfloat16 and converter.framework != "tensorflow"):
        return None
    make = tf2onnx_snippet if converter.framework == "tensorflow" else onnx2tf_snippet
    return make(case, call, _numpy_value, _tolerance(case))


def _openvino(case: Any, converter: Any) -> str | None:
    """OpenVINO's PyTorch frontend on the module, or its ONNX frontend on upstream.onnx: fuzzer/cases/
    snippet_openvino.py; None with bfloat16 inputs, which numpy cannot write."""
    if any(x.dtype.name == "bfloat16" for x in case.inputs):
        return None
    call = snippet_of(converter, converter.options(case.converter_options))
    if call is None:
        return None
    # Judged at the tolerance of the dtype the plugin computes each output in, as the oracle judges it.
    tolerance = _tolerance(case, computed_in(case.converter_options.get("precision", "f32")))
    if converter.framework != "pytorch":
        return openvino_onnx_snippet(case, call, _numpy_value, tolerance)
    module, inputs = _torch_module(case)
    return openvino_torch_snippet(module, inputs, call, tolerance)


def _torch_module(case: Any) -> tuple[str, list[str]]:
    """The graph as a torch module `Model` (small weights inline), and the lines that make its `inputs`."""
    graph = case.graph
    module = render_module(graph).replace("class Repro(", "class Model(").replace("_register(self, ",
                                                                                    "self.register_buffer(")
    for w in graph.weights:
        module = module.replace(f"load_tensor('weights/{w}.pb')", _torch_value(case.weights[w], f"weights/{w}.pb"))
    if not graph.weights:  # nothing to register: the constructor says nothing
        module = module.replace("    def __init__(self):\n        super().__init__()\n\n", "")
    inputs = [f"{identifier(n)} = {_torch_value(x, f'test_data_set_0/input_{i}.pb')}"
              for i, (n, x) in enumerate(zip(graph.inputs, case.inputs, strict=True))]
    inputs.append(f"module, inputs = Model().eval(), ({''.join(identifier(n) + ', ' for n in graph.inputs)})")
    return module, inputs


def _from_torch(case: Any, call: Snippet, runs_ort: bool) -> str:
    graph = case.graph
    module, inputs = _torch_module(case)
    lines = ["import numpy as np", "import onnx", "import onnxruntime as ort", "import torch", *call.imports]
    lines += ["from onnx import numpy_helper", "", module]
    if any("OUTPUT_NAMES" in line for line in call.lines):
        lines += [f"INPUT_NAMES, OUTPUT_NAMES = {list(graph.inputs)!r}, {list(graph.outputs)!r}"]
    else:
        lines += [f"INPUT_NAMES = {list(graph.inputs)!r}"]
    lines += [*inputs, *call.lines]
    if at_second_shape(case.verdict) and len(case.second_inputs) == len(graph.inputs):
        second = "".join(f"{_torch_value(x, f'test_data_set_1/input_{i}.pb')}, "
                         for i, x in enumerate(case.second_inputs))
        lines += [f"inputs = ({second})  # traced at the shapes above, the dynamic model runs at a second shape"]
    if runs_ort and bf16.has_bfloat16(case):
        lines[1:1] = bf16.TORCH_IMPORTS
        return _finish(case, lines, call, runs_ort, bf16.TORCH_FEEDS, bf16.TORCH_WANT)
    return _finish(case, lines, call, runs_ort, "[x.numpy() for x in inputs]",
                   "[y.detach().numpy() for y in module(*inputs)]")


def _from_upstream(case: Any, call: Snippet, runs_ort: bool) -> str:
    lines = ["import numpy as np", "import onnx", "import onnxruntime as ort", *call.imports,
             "from onnx import numpy_helper", "", 'model = onnx.load("upstream.onnx")  # what the converter received']
    if runs_ort:  # the inputs and the baseline; a failure at validation needs neither
        lines += [f"{identifier(n)} = {_numpy_value(x, f'test_data_set_0/input_{i}.pb')}"
                  for i, (n, x) in enumerate(zip(case.graph.inputs, case.inputs, strict=True))]
        lines += [f"inputs = [{', '.join(identifier(n) for n in case.graph.inputs)}]",
                  "want = run(model)  # the received model, optimizations off"]
    lines += call.lines
    return _finish(case, lines, call, runs_ort, "inputs", None)


def _finish(case: Any, lines: list[str], call: Snippet, runs_ort: bool, feeds: str, expected: str | None) -> str:
    """The validation, the run at the converter's level and the comparison, after the model is made."""
    level = call.level
    free = ["    for value, x in zip([i for i in model.graph.input if i.name not in {t.name for t in "
            "model.graph.initializer}], " + feeds + "):",
            "        for dim, size in zip(value.type.tensor_type.shape.dim, x.shape):",
            "            if dim.dim_param and free_dims:  # each named dimension fixed to the input's size",
            "                options.add_free_dimension_override_by_name(dim.dim_param, size)"]
    free = free if call.free_dims else []
    run = [f"def run(model, level=ort.GraphOptimizationLevel.{ORT_LEVEL_MEMBERS['disabled']}"
           + (", free_dims=False):" if call.free_dims else "):"),
           "    options = ort.SessionOptions()",
           "    options.graph_optimization_level = level", *free,
           "    session = ort.InferenceSession(model.SerializeToString(), options, "
           "providers=['CPUExecutionProvider'])",
           f"    return session.run(None, dict(zip([i.name for i in session.get_inputs()], {feeds})))", ""]
    if runs_ort and bf16.has_bfloat16(case):
        run[-2:] = [bf16.run_line(feeds), ""]
        run[:0] = bf16.HELPERS
        lines[:0] = bf16.IMPORTS
    at = f"ort.GraphOptimizationLevel.{ORT_LEVEL_MEMBERS[level]}"
    body = list(CHECKER) if case.verdict.stage.value == "validation" or not runs_ort else []
    if runs_ort:
        extra = ", free_dims=True" if call.free_dims else ""
        body.append(f"got = run(model, {at}{extra})" if level != "disabled" else "got = run(model)")
        if expected is not None:
            body.append(f"want = {expected}")
        rtol, atol = _tolerance(case)
        body += ["for w, g in zip(want, got):",
                 "    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)",
                 f"    np.testing.assert_allclose(g, w, rtol={rtol!r}, atol={atol!r})  # expected vs observed"]
    split = next(i for i, line in enumerate(lines) if line == "")
    imports = [line for line in dict.fromkeys(lines[:split])
               if "numpy_helper" not in line or any("numpy_helper." in later for later in lines[split:])]
    return "\n".join(imports + [""] + (run if runs_ort else []) + lines[split + 1:] + body)


def _tolerance(case: Any, computed_in: dict[str, str] | None = None) -> tuple[float, float]:
    """The loosest tolerance of the outputs' dtypes, each taken as the dtype `computed_in` says it is computed in."""
    narrowed = computed_in or {}
    dtypes = [narrowed.get(d, d) for d in (case.graph.types[o].dtype.value for o in case.graph.outputs)]
    tolerances = [DEFAULT_TOLERANCES[d] for d in dtypes if d in DEFAULT_TOLERANCES]
    if not tolerances:
        return 0.0, 0.0
    return max(t.rtol for t in tolerances), max(t.atol for t in tolerances)


def _torch_value(x: np.ndarray, rel: str) -> str:
    if x.dtype.name == "bfloat16":  # numpy has no bfloat16 of its own: through float32, exactly
        return f'torch.from_numpy(numpy_helper.to_array(onnx.load_tensor("{rel}")).astype(np.float32)).bfloat16()'
    if x.size > INLINE_ELEMENTS:
        return f'torch.from_numpy(numpy_helper.to_array(onnx.load_tensor("{rel}")).copy())'
    dtype = "bool" if x.dtype == np.bool_ else x.dtype.name
    return f"torch.tensor({_flat(x)}, dtype=torch.{dtype}).reshape({tuple(x.shape)!r})"


def _numpy_value(x: np.ndarray, rel: str) -> str:
    if x.size > INLINE_ELEMENTS or x.dtype.name == "bfloat16":  # numpy_helper reads bfloat16 as ml_dtypes does
        return f'numpy_helper.to_array(onnx.load_tensor("{rel}"))'
    return f"np.array({_flat(x)}, dtype=np.{x.dtype.name}).reshape({tuple(x.shape)!r})"


def _flat(x: np.ndarray) -> str:
    return f"[{', '.join(_scalar(v) for v in x.ravel())}]"


def _scalar(value: Any) -> str:
    if isinstance(value, np.floating) and not math.isfinite(float(value)):
        return f"float('{float(value)}')"
    return str(value.item() if isinstance(value, np.bool_) else value)


__all__: Sequence[str] = ("render_snippet",)
