"""repro.py for a case folder: plain PyTorch source of the graph, the same converter call, a comparison, an exit code.

The module is rendered from the graph, one line of torch code per node, each written by the operator's own
`torch_source` (tests/test_op_registry.py checks every operator's source against its forward, bit for bit).
The script needs torch, onnx, onnxruntime and numpy (plus the ONNX optimizer under test, if any), never convsmith.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.upstream import starts_upstream
from generators.ir import Graph
from generators.registry import REGISTRY, OpRegistry
from oracles.compare import DEFAULT_TOLERANCES

# ---- rendering the module -----------------------------------------------------------------------------------

def identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or keyword.iskeyword(text):
        text = f"v_{text}"
    return text


def render_module(graph: Graph, registry: OpRegistry = REGISTRY) -> str:
    """`class Repro(torch.nn.Module)`: weights loaded from weights/<name>.pb, in forward one line per node, each
    the operator's own plain-PyTorch source."""
    names = {n: identifier(n) for n in graph.types}
    lines = ["class Repro(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for w in graph.weights:
        lines.append(f"        _register(self, {w!r}, load_tensor('weights/{w}.pb'))")
    args = ", ".join(names[n] for n in graph.inputs)
    lines += ["", f"    def forward(self, {args}):"]
    for w in graph.weights:
        lines.append(f"        {names[w]} = self.{w}")
    for node in graph.nodes:
        op = registry[node.op]
        expr = op.torch_source(node.attrs, [names[n] for n in node.inputs])
        # A one-piece split or unbind still returns a tuple: its one output is unpacked from it.
        targets = ", ".join(names[o] for o in node.outputs) + ("," if op.returns_sequence and len(node.outputs) == 1
                                                              else "")
        lines.append(f"        {targets} = {expr}  # {node.op}")
    lines.append(f"        return ({''.join(names[o] + ', ' for o in graph.outputs)})")
    return "\n".join(lines) + "\n"


# ---- the script ------------------------------------------------------------------------------------------------

_HEADER = '''#!/usr/bin/env python3
"""{title}

Standalone reproduction ({libs}; not convsmith). Run: python repro.py
Exit status: 0 the bug does not show, 1 it shows (the failure this case was filed for), 2 a file of the
case is missing or unreadable, 3 cannot run here (a library is missing), 4 it fails, but otherwise.
"""
import ctypes
import os
import sys
import traceback
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
{torch_import}    from onnx import numpy_helper
except ImportError as exc:
    print(f"repro.py: cannot run: {{exc}}", file=sys.stderr)
    sys.exit(3)

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = {case!r}
SYMPTOM = {symptom!r}
EXPECTED_ERROR = {error!r}  # exception type name the bug raises (crash-like symptoms)
CONVERTER = {converter!r}
OPTIONS = {options}
INPUT_NAMES = {inputs!r}
OUTPUT_NAMES = {outputs!r}
OUTPUT_DTYPES = {dtypes!r}
TOLERANCES = {tolerances!r}  # dtype: (rtol, atol)
DEVICE = {device!r}  # where convsmith ran the source model and ONNX Runtime
DYNAMIC = {dynamic!r}  # the dims a dynamic export marks (None: a static export)
SECOND_SHAPE = {second!r}  # test_data_set_1 holds inputs at a second shape the dynamic model must run at too
DIVERGENCES = ("wrong_shape", "wrong_dtype", "wrong_values")
LOST = ("process_death", "hang", "out_of_memory")  # the conversion runs in a child, whose end is the evidence
CHILD_TIMEOUT_S = {timeout!r}  # a child still converting then is a hang
MEMORY_MB = {memory_mb!r}  # an out-of-memory case's child may grow by this much
'''

_TORCH_TENSORS = '''

def load_tensor(rel):
    proto = onnx.TensorProto()
    with open(os.path.join(HERE, rel), "rb") as handle:
        proto.ParseFromString(handle.read())
    array = numpy_helper.to_array(proto)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True))  # keeps 0-d tensors 0-d


def _register(module, name, value):
    if value.is_floating_point():
        module.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
    else:
        module.register_buffer(name, value)


def to_numpy(x):
    x = x.detach().cpu()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


def ort_value(x):
    x = x.detach().cpu()
    if x.dtype == torch.bfloat16:
        words = x.contiguous().view(torch.int16).numpy().view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(x.contiguous().numpy())
'''

_NUMPY_TENSORS = '''

def load_tensor(rel):
    proto = onnx.TensorProto()
    with open(os.path.join(HERE, rel), "rb") as handle:
        proto.ParseFromString(handle.read())
    return np.array(numpy_helper.to_array(proto), copy=True)  # bfloat16 arrives as ml_dtypes.bfloat16


def to_numpy(x):
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def ort_value(x):
    if x.dtype.name == "bfloat16":
        words = np.ascontiguousarray(x).view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))
'''

_RUNTIME = '''

def from_ort_value(value):
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    words = np.frombuffer(raw, dtype=np.uint16).reshape(value.shape())
    return (words.astype(np.uint32) << 16).view(np.float32)


def run_onnx(data, inputs, level="disabled"):
    """ONNX Runtime on DEVICE, one CPU thread, at an optimization level (as convsmith runs targets)."""
    levels = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    options = ort.SessionOptions()
    options.graph_optimization_level = levels[level]
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if DEVICE == "cuda" else ["CPUExecutionProvider"]
    session = ort.InferenceSession(data, options, providers=providers)
    wanted = [i.name for i in session.get_inputs()]
    by_name = dict(zip(INPUT_NAMES, inputs))
    pairs = zip(wanted, [by_name[n] for n in wanted] if all(n in by_name for n in wanted) else inputs)
    values = session.run_with_ort_values(None, {n: ort_value(x) for n, x in pairs})
    return [from_ort_value(v) for v in values]


def check_and_serialize(model):
    data = model.SerializeToString()
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    return data


def compare(name, actual, expected, dtype):
    """One output: (ok, text). Integers and bools exactly; floats within the dtype's tolerance."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return False, f"{name}: shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return False, f"{name}: dtype {actual.dtype}, expected {expected.dtype}"
    if dtype not in TOLERANCES:
        bad = int((actual != expected).sum())
        return bad == 0, f"{name}: {bad} of {actual.size} elements differ (exact comparison)"
    rtol, atol = TOLERANCES[dtype]
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    same_nan = np.isnan(a) == np.isnan(e)
    finite = np.isfinite(a) & np.isfinite(e)
    same_inf = np.where(np.isinf(a) | np.isinf(e), a == e, True)
    diff = np.where(finite, np.abs(a - e), 0.0)
    bad = ~same_nan | ~same_inf | (diff > atol + rtol * np.abs(np.where(finite, e, 0.0)))
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(np.where(finite, e, 0.0)), 1e-30)
    max_rel = float(rel.max()) if rel.size else 0.0
    text = (f"{name}: {int(bad.sum())} of {bad.size} elements out of tolerance (rtol={rtol}, atol={atol}); "
            f"max abs diff {max_abs:.6g}, max rel diff {max_rel:.6g}")
    return not bool(bad.any()), text


def judge(outputs, wanted, label):
    """The first way the outputs differ from `wanted` ("wrong_shape", "wrong_dtype", "wrong_values"), or None."""
    kinds = ["wrong_shape"] if len(outputs) != len(wanted) else []
    if kinds:
        print(f"observed {len(outputs)} outputs, expected {len(wanted)}")
    for name, got, want, dtype in zip(OUTPUT_NAMES, outputs, wanted, OUTPUT_DTYPES):
        ok, text = compare(name, got, want, dtype)
        print(("  ok   " if ok else "  BAD  ") + text)
        if not ok:
            print(f"    observed: {np.asarray(got).ravel()[:8]}")
            print(f"    {label}: {np.asarray(want).ravel()[:8]}")
            got, want = np.asarray(got), np.asarray(want)
            kinds.append("wrong_shape" if got.shape != want.shape else
                         "wrong_dtype" if got.dtype != want.dtype else "wrong_values")
    return min(kinds, key=DIVERGENCES.index) if kinds else None


def outcome(shown):
    """1 when the failure the case was filed for shows, 4 when another does."""
    print("BUG REPRODUCES" if shown else f"FAILS DIFFERENTLY (filed as {SYMPTOM})")
    return 1 if shown else 4


def judged(kind):
    """The exit status for what `judge` found."""
    if kind is None:
        print("bug does not show: converted outputs match")
        return 0
    return outcome(kind == SYMPTOM)


def report_crash(exc, expected):
    """What the conversion raised, beside what was expected: 1 when it is the error the case was filed for."""
    if SYMPTOM == "out_of_memory":
        shown = isinstance(exc, MemoryError) or "allocate memory" in str(exc) or "bad_alloc" in str(exc)
    else:
        shown = SYMPTOM not in DIVERGENCES + LOST and type(exc).__name__ == (EXPECTED_ERROR or type(exc).__name__)
    traceback.print_exc()
    print(f"observed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    print(f"expected: {expected}")
    return outcome(shown)


def in_child(main):
    """A death, hang or memory exhaustion takes the process with it: the conversion runs in a child, and how that
    child ends is what shows the bug."""
    import signal
    import subprocess

    if os.environ.get("CONVSMITH_REPRO_CHILD") == "1":
        if SYMPTOM == "out_of_memory":
            _limit_memory()
        return main()
    env = dict(os.environ, CONVSMITH_REPRO_CHILD="1")
    print(f"converting in a child process (the case is a {SYMPTOM}; timeout {CHILD_TIMEOUT_S} s)", flush=True)
    try:
        child = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"observed: no result after {CHILD_TIMEOUT_S} s (killed)")
        return outcome(SYMPTOM == "hang")
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        print(f"observed: the converting process was killed by {name}")
        return outcome(SYMPTOM == "process_death" or (SYMPTOM == "out_of_memory" and name == "SIGKILL"))
    return child.returncode  # it ran to the end: its own status (0 the bug does not show, 4 another failure)


def _limit_memory():
    import resource

    with open("/proc/self/status") as handle:
        size = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
    limit = size + MEMORY_MB * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
'''

_TORCH_EXPORT = '''

def dynamic_axes():
    """torch.onnx.export's dynamic_axes for DYNAMIC: every marked input and output axis by its dim's name."""
    axes = {}
    for dim in DYNAMIC["dims"]:
        for name, axis in dim["axes"]:
            axes.setdefault(name, {})[axis] = dim["name"]
    for name, named in DYNAMIC["outputs"].items():
        axes.setdefault(name, {}).update({int(axis): dim for axis, dim in named.items()})
    return axes


def dynamic_shapes():
    """torch.export's dynamic_shapes for DYNAMIC: one Dim per dynamic dim, shared by its axes (Dim.AUTO for the
    leading-dim hints of a graph with no second shape); None for an input with no dynamic axis."""
    shapes = {name: {} for name in INPUT_NAMES}
    for dim in DYNAMIC["dims"]:
        auto = not DYNAMIC["exact"]
        spec = torch.export.Dim.AUTO if auto else torch.export.Dim(dim["name"], min=dim["min"], max=dim["max"])
        for name, axis in dim["axes"]:
            shapes[name][axis] = spec
    return tuple(shapes[name] or None for name in INPUT_NAMES)


def export_script(module, inputs, opset, constant_folding=True, script_module=False, dynamic=False):
    import io
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if script_module:
            module = torch.jit.trace(module, tuple(inputs), check_trace=False)
        buffer = io.BytesIO()
        torch.onnx.export(module, tuple(inputs), buffer, dynamo=False, opset_version=opset,
                          input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES),
                          do_constant_folding=constant_folding, dynamic_axes=dynamic_axes() if dynamic else None)
    return onnx.load_from_string(buffer.getvalue())


def export_dynamo(module, inputs, opset, optimize=True, dynamic=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, tuple(inputs), dynamo=True, optimize=optimize, opset_version=opset,
                                    input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES), verbose=False,
                                    dynamic_shapes=dynamic_shapes() if dynamic else None)
    return program.model_proto


def export_upstream(module, inputs):
    if OPTIONS.get("upstream") == "onnx-native":  # written by convsmith straight from the graph: the saved model
        return onnx.load(os.path.join(HERE, "upstream.onnx"))
    if OPTIONS.get("upstream", "torch-onnx-script") == "torch-onnx-dynamo":
        return export_dynamo(module, inputs, OPTIONS["opset"])
    return export_script(module, inputs, OPTIONS["opset"])


def convert_and_run(module, inputs):
    """(target outputs, baseline outputs or None, the target model): what convsmith compared."""
    if CONVERTER == "torch-onnx-script":
        model = export_script(module, inputs, OPTIONS["opset"], OPTIONS["constant_folding"],
                              OPTIONS.get("script_module", False), OPTIONS.get("dynamic", False))
        data = check_and_serialize(model)
        return run_onnx(data, inputs), None, data
    if CONVERTER == "torch-onnx-dynamo":
        model = export_dynamo(module, inputs, OPTIONS["opset"], OPTIONS["optimize"], OPTIONS.get("dynamic", False))
        data = check_and_serialize(model)
        return run_onnx(data, inputs), None, data
    upstream = check_and_serialize(export_upstream(module, inputs))
    baseline = run_onnx(upstream, inputs)
    if CONVERTER == "ort-optimizer":
        return run_onnx(upstream, inputs, OPTIONS["level"]), baseline, upstream
    data = check_and_serialize(transform(onnx.load_from_string(upstream)))
    return run_onnx(data, inputs), baseline, data
'''

_ENTRY = '''

if __name__ == "__main__":
    try:
        status = in_child(main) if SYMPTOM in LOST else main()
    except ImportError as exc:  # the converter under test (onnxsim, onnxslim, ...) is not installed
        print(f"repro.py: cannot run: {exc}", file=sys.stderr)
        status = 3
    except OSError as exc:  # a file of the case folder is missing or unreadable
        print(f"repro.py: {exc.strerror}: {exc.filename}", file=sys.stderr)
        status = 2
    sys.exit(status)
'''

_MAIN_MODULE = '''

def main():
    torch.manual_seed(0)
    inputs = [load_tensor(f"test_data_set_0/input_{i}.pb").to(DEVICE) for i in range(len(INPUT_NAMES))]
    saved = [load_tensor(f"test_data_set_0/output_{i}.pb") for i in range(len(OUTPUT_NAMES))]
    module = Repro().eval().to(DEVICE)
    with torch.no_grad():
        eager = [to_numpy(x) for x in module(*inputs)]
    print(f"{CASE}: {CONVERTER} {OPTIONS}")
    print(f"torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    if judge(eager, [to_numpy(x) for x in saved], "saved expected") is None:
        print("eager PyTorch matches the saved expected outputs")
    try:
        outputs, baseline, data = convert_and_run(module, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "a converted model that runs and matches eager PyTorch")
    if baseline is not None:
        print("target vs the unconverted ONNX model (baseline):")
        kind = judge(outputs, baseline, "baseline")
    else:
        print("target vs eager PyTorch:")
        kind = judge(outputs, eager, "eager")
    if SECOND_SHAPE and kind is None:  # the dynamic model, traced at the shapes above, at its second shape
        inputs = [load_tensor(f"test_data_set_1/input_{i}.pb").to(DEVICE) for i in range(len(INPUT_NAMES))]
        with torch.no_grad():
            eager = [to_numpy(x) for x in module(*inputs)]
        try:
            outputs = run_onnx(data, inputs)
        except Exception as exc:
            return report_crash(exc, "the dynamic model runs at the second shape too and matches eager PyTorch")
        print(f"at the second shape {[tuple(x.shape) for x in inputs]}, target vs eager PyTorch:")
        kind = judge(outputs, eager, "eager")
    return judged(kind)
''' + _ENTRY

_MAIN_TOOL = '''

def convert_and_run(upstream, inputs):
    """(target outputs, baseline outputs): the tool's model against the model it received, both in ONNX Runtime."""
    baseline = run_onnx(upstream, inputs)
    if CONVERTER == "ort-optimizer":
        return run_onnx(upstream, inputs, OPTIONS["level"]), baseline
    model = transform(onnx.load_from_string(upstream))
    return run_onnx(check_and_serialize(model), inputs), baseline


def main():
    inputs = [load_tensor(f"test_data_set_0/input_{i}.pb") for i in range(len(INPUT_NAMES))]
    with open(os.path.join(HERE, "upstream.onnx"), "rb") as handle:
        upstream = handle.read()
    print(f"{CASE}: {CONVERTER} {OPTIONS}, starting from upstream.onnx")
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    try:
        outputs, baseline = convert_and_run(upstream, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "the converted model runs and matches upstream.onnx run with optimizations off")
    print("target vs upstream.onnx run with optimizations off (baseline):")
    return judged(judge(outputs, baseline, "baseline"))
''' + _ENTRY

# ONNX-to-ONNX converters: their repro.py starts from the saved upstream.onnx and needs no torch.
ONNX_TOOLS = frozenset(name for name, converter in CONVERTERS.items() if starts_upstream(converter))
_EXTRA_LIBS = {"onnxsim": "onnxsim", "onnxslim": "onnxslim", "onnxoptimizer": "onnxoptimizer"}
HANG_AFTER_S = re.compile(r"no result after (\d+(?:\.\d+)?) s")
LOST_CHILD_TIMEOUT_S = 600  # a death case's child that neither dies nor ends by then fails otherwise
MEMORY_MB = 4096  # the worker's default memory budget (fuzzer/campaign/worker.py)


def render_transform(case: Any, converter: Converter | None = None) -> str:
    """`transform(model)`: the ONNX-to-ONNX converter's own call (its `snippet`, as report.md writes it too)."""
    converter = converter or CONVERTERS.get(case.converter)
    try:
        call = converter.snippet(converter.options(case.converter_options)) if converter else None
    except NotImplementedError:
        call = None
    if call is None or call.from_torch:
        body = [f"print('repro.py: cannot run: it has no call of {case.converter}', file=sys.stderr)",
                "raise SystemExit(3)"]
    else:  # the ORT optimizer's call is the session's level: its model goes through unchanged
        body = [*call.imports, *call.lines, "return model"]
    lines = ["", "", "def transform(model):", '    """The ONNX-to-ONNX converter under test."""']
    return "\n".join(lines + [f"    {line}" for line in body]) + "\n"


def expected_error(message: str) -> str:
    """'onnx.onnx_cpp2py_export.shape_inference.InferenceError: ...' -> 'InferenceError'."""
    head = message.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if re.fullmatch(r"[\w.]+", head) else ""


def child_timeout_s(verdict: Any) -> float:
    """How long a lost case's repro.py waits for its converting child: a hang's own timeout, else a long while."""
    found = HANG_AFTER_S.search(verdict.message) if verdict.symptom.json_name == "hang" else None
    return float(found.group(1)) if found else LOST_CHILD_TIMEOUT_S


def render_repro(case: Any, converter: Converter | None = None) -> str:
    """The standalone repro.py of a CaseData (see module doc): from the saved upstream model, without torch, for an
    ONNX-to-ONNX converter; from the graph written as plain PyTorch otherwise. `converter`: the registry entry the
    case was found with, when it is not one of CONVERTERS."""
    graph: Graph = case.graph
    verdict = case.verdict
    converter = converter or CONVERTERS.get(case.converter)
    title = f"convsmith case {case.id}: {verdict.symptom.json_name} in {case.converter} ({verdict.stage.value})"
    extra = f", {_EXTRA_LIBS[case.converter]}" if case.converter in _EXTRA_LIBS else ""
    from_upstream = converter is not None and starts_upstream(converter) and case.upstream_model is not None
    header = _HEADER.format(
        libs=("" if from_upstream else "torch, ") + f"onnx, onnxruntime, numpy{extra}",
        torch_import="" if from_upstream else "    import torch\n",
        title=title, case=case.id, symptom=verdict.symptom.json_name,
        error=expected_error(verdict.message), converter=case.converter,
        options=repr(dict(sorted(case.converter_options.items()))),
        inputs=tuple(graph.inputs), outputs=tuple(graph.outputs),
        dtypes=tuple(graph.types[o].dtype.value for o in graph.outputs),
        tolerances={k: (v.rtol, v.atol) for k, v in DEFAULT_TOLERANCES.items()},
        device=case.device, dynamic=case.dynamic if case.dynamic is None else dict(case.dynamic),
        second=bool(case.second_inputs), timeout=child_timeout_s(verdict), memory_mb=MEMORY_MB,
    )
    if from_upstream:
        return header + _NUMPY_TENSORS + _RUNTIME + render_transform(case, converter) + _MAIN_TOOL
    return (header + _TORCH_TENSORS + _RUNTIME + render_transform(case, converter) + _TORCH_EXPORT + "\n"
            + render_module(graph) + _MAIN_MODULE)


__all__ = ["render_module", "render_repro"]
