"""The few lines of a report for a converter of the TensorFlow family: onnx2tf (upstream.onnx converted, run as
its Keras or TFLite model against ONNX Runtime) and tf2onnx (the graph as a TensorFlow function, exported, run in
ONNX Runtime against TensorFlow eager). Each prints both sides, then asserts; the ONNX graph involved is listed in
ONNX terms as comments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
from onnx import helper

from fuzzer.cases import snippet_bf16 as bf16
from fuzzer.cases.repro import identifier
from fuzzer.converters.describe import Snippet

NODE_LINES = 12  # nodes of the ONNX graph listed, at most
ATTRIBUTE_CHARS = 40  # an attribute's value is cut here


def onnx2tf_snippet(case: Any, call: Snippet, value: Any, tolerance: tuple[float, float]) -> str | None:
    """upstream.onnx through the converter's call and `runs`, against its ONNX Runtime run (optimizations off);
    None where the case saved no upstream.onnx. `value(array, path)` writes an input as numpy."""
    if case.upstream_model is None:
        return None
    upstream, fed = upstream_inputs(case)
    names = [n for n, _ in fed]
    nchw = [n for n, i in fed if case.inputs[i].ndim in (3, 4, 5)]
    lines = ["import os", "import tempfile", "", "import numpy as np", "import onnx", "import onnxruntime as ort",
             *call.imports, "from onnx import numpy_helper", "",
             *graph_comment("upstream.onnx, what the converter received", upstream),
             'model = onnx.load("upstream.onnx")', *input_lines(case, fed, value),
             f"inputs = {{{', '.join(f'{n!r}: {identifier(n)}' for n in names)}}}",
             "options = ort.SessionOptions()",
             "options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL",
             "want = ort.InferenceSession(model.SerializeToString(), options, "
             "providers=['CPUExecutionProvider']).run(None, inputs)",
             "os.chdir(tempfile.mkdtemp())  # the converter rewrites the file it converts: it gets a copy",
             'onnx.save(model, "model.onnx")',
             f"nchw_inputs = {nchw!r}  # rank 3 to 5: moved to channels-last unless named", *call.lines, *call.runs,
             *CHANNELS_FIRST, *compare("ONNX Runtime", "as_onnx(np.asarray(g), w)", tolerance)]
    return "\n".join(lines)


def upstream_inputs(case: Any) -> tuple[onnx.ModelProto, list[tuple[str, int]]]:
    """upstream.onnx, and each of its data inputs with the index of the case's input it is fed: by name, or in order
    where its exporter renamed an input."""
    upstream = onnx.load_from_string(bytes(case.upstream_model))
    names = data_input_names(upstream)
    order = list(case.graph.inputs)
    at = [order.index(n) for n in names] if all(n in order for n in names) else list(range(len(names)))
    return upstream, list(zip(names, at, strict=True))


def input_lines(case: Any, fed: list[tuple[str, int]], value: Any) -> list[str]:
    """One line per fed input, `name = <its value>` (`value(array, path)` writes it)."""
    return [f"{identifier(n)} = {value(case.inputs[i], f'test_data_set_0/input_{i}.pb')}" for n, i in fed]


# onnx2tf leaves outputs channels-last and computes float16 in float32 by design: both undone before comparing.
CHANNELS_FIRST = (
    "def as_onnx(g, w):  # onnx2tf gives outputs channels-last (channel axis 1 from rank 3 up, 0 at rank 2)",
    "    axis = 1 if w.ndim >= 3 else 0",
    "    if w.ndim >= 2 and g.shape != w.shape and g.shape == np.moveaxis(w, axis, -1).shape:",
    "        g = np.moveaxis(g, -1, axis)",
    "    return g.astype(np.float16) if w.dtype == np.float16 and g.dtype == np.float32 else g",
    "")


def tf2onnx_snippet(case: Any, call: Snippet, value: Any, tolerance: tuple[float, float]) -> str | None:
    """The graph as TensorFlow code exported by the converter's call, run in ONNX Runtime (optimizations off)
    against TensorFlow eager; None where the graph has no TensorFlow source."""
    from generators.tf_model import render_tf_model

    try:
        model_code = render_tf_model(case.graph)
    except ValueError:
        return None
    graph = case.graph
    weights = [f"    {w!r}: {value(case.weights[w], f'weights/{w}.pb')}," for w in graph.weights]
    specs = ", ".join(f"tf.TensorSpec({tuple(x.shape)!r}, tf.{x.dtype.name}, name={n!r})"
                      for n, x in zip(graph.inputs, case.inputs, strict=True))
    lines = ["import numpy as np", "import onnx", "import onnxruntime as ort", "import tensorflow as tf",
             *call.imports, "from onnx import numpy_helper", "", model_code,
             *(("weights = {", *weights, "}") if weights else ("weights = {}",)),
             *(f"{identifier(n)} = {value(x, f'test_data_set_0/input_{i}.pb')}"
               for i, (n, x) in enumerate(zip(graph.inputs, case.inputs, strict=True))),
             f"inputs = [{', '.join(identifier(n) for n in graph.inputs)}]", f"signature = [{specs}]",
             "fn = make_model(weights)", *call.lines,
             *(graph_comment("the converter's model.onnx", onnx.load_from_string(bytes(case.model)))
               if case.model else ()),
             "options = ort.SessionOptions()",
             "options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL",
             "session = ort.InferenceSession(model.SerializeToString(), options, providers=['CPUExecutionProvider'])",
             *(_BF16_RUN if bf16.has_bfloat16(case) else _RUN), *compare("TensorFlow eager", "g", tolerance)]
    if bf16.has_bfloat16(case):
        lines[:0] = bf16.IMPORTS
        at = lines.index("options = ort.SessionOptions()")
        lines[at:at] = bf16.HELPERS
    return "\n".join(lines)


_RUN = ("got = session.run(None, dict(zip([i.name for i in session.get_inputs()], inputs)))",
        "want = [y.numpy() for y in fn(*(tf.constant(x) for x in inputs))]")
_BF16_RUN = ("got = [from_ort_value(v) for v in session.run_with_ort_values(None, dict(zip([i.name for i in "
             "session.get_inputs()], [ort_value(x) for x in inputs])))]",
             "want = [np.asarray(y.numpy(), np.float32) if y.dtype == tf.bfloat16 else y.numpy() "
             "for y in fn(*(tf.constant(x) for x in inputs))]")


def compare(expected_by: str, observed: str, tolerance: tuple[float, float]) -> list[str]:
    """Both sides printed, then numpy's assertion of each output (dtype and shape first)."""
    rtol, atol = tolerance
    made = [f"    g = {observed}"] if observed != "g" else []
    return ["for i, (w, g) in enumerate(zip(want, got)):", *made,
            f"    print(f'output {{i}} expected ({expected_by}):', w.dtype, w.shape, w.ravel()[:8])",
            "    print(f'output {i} observed:', g.dtype, g.shape, g.ravel()[:8])",
            "for w, g in zip(want, got):", *made,
            "    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)",
            f"    np.testing.assert_allclose(g, w, rtol={rtol!r}, atol={atol!r})  # expected vs observed"]


def data_input_names(model: onnx.ModelProto) -> list[str]:
    """The model's inputs that take data (some exporters list initializers among them)."""
    constants = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in constants]


def graph_comment(what: str, model: onnx.ModelProto) -> list[str]:
    """The model's nodes as comments, `outputs = OpType(inputs) {key attributes}`, at most NODE_LINES."""
    nodes = list(model.graph.node)
    lines = [f"# {what}:"] + [f"#   {node_line(n)}" for n in nodes[:NODE_LINES]]
    if len(nodes) > NODE_LINES:
        lines.append(f"#   ... {len(nodes) - NODE_LINES} more nodes")
    return lines


def node_line(node: onnx.NodeProto) -> str:
    """`y = Conv(x, w) {strides=[1, 1]}`: a tensor attribute by its shape, a graph attribute by its name."""
    attrs = ", ".join(f"{a.name}={attribute_text(a)}" for a in node.attribute)
    op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
    return f"{', '.join(node.output)} = {op}({', '.join(node.input)})" + (f" {{{attrs}}}" if attrs else "")


def attribute_text(attribute: onnx.AttributeProto) -> str:
    value = helper.get_attribute_value(attribute)
    if isinstance(value, onnx.TensorProto):
        array = onnx.numpy_helper.to_array(value)
        text = repr(array.tolist()) if array.size <= 4 else f"tensor{list(array.shape)}"
    elif isinstance(value, onnx.GraphProto):
        text = f"graph {value.name}"
    else:
        text = repr(value.decode() if isinstance(value, bytes) else
                    [v.decode() if isinstance(v, bytes) else v for v in value] if isinstance(value, list) else value)
    return text if len(text) <= ATTRIBUTE_CHARS else text[:ATTRIBUTE_CHARS] + "…"


__all__: Sequence[str] = ("onnx2tf_snippet", "tf2onnx_snippet")
