#!/usr/bin/env python3
"""convsmith case crash-onnxslim-graph_optimization-ValueError-01ab1eabbd25-reduced: crash in onnxslim (graph_optimization)

Standalone reproduction (onnx, onnxruntime, numpy, onnxslim; not convsmith). Run: python repro.py
Exit status: 0 the bug does not show, 1 it shows (the failure this case was filed for), 2 a file of the
case is missing or unreadable, 3 cannot run here (a library is missing), 4 it fails, but otherwise.
"""
import ctypes
import os
import sys
import traceback

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
except Exception as exc:  # missing, or built against another numpy (a SystemError as it loads): not this bug
    print(f"repro.py: cannot run: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(3)

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = 'crash-onnxslim-graph_optimization-ValueError-01ab1eabbd25-reduced'
SYMPTOM = 'crash'
EXPECTED_ERROR = 'ValueError'  # exception type name the bug raises (crash-like symptoms)
CONVERTER = 'onnxslim'
OPTIONS = {'no_constant_folding': False, 'opset': 17, 'upstream': 'torch-onnx-script'}
INPUT_NAMES = ('in2',)
OUTPUT_NAMES = ('t3',)
OUTPUT_DTYPES = ('float64',)
TOLERANCES = {'float64': (1e-09, 1e-12), 'float32': (0.0001, 1e-06), 'float16': (0.005, 0.001), 'bfloat16': (0.016, 0.01), 'int32': (0.0, 0.0), 'int64': (0.0, 0.0), 'int8': (0.0, 0.0), 'uint8': (0.0, 0.0), 'bool': (0.0, 0.0)}  # dtype: (rtol, atol)
DEVICE = 'cpu'  # where convsmith ran the source model and ONNX Runtime
DYNAMIC = None  # the dims a dynamic export marks (None: a static export)
SECOND_SHAPE = False  # test_data_set_1 holds inputs at a second shape the dynamic model must run at too
DIVERGENCES = ('wrong_shape', 'wrong_dtype', 'wrong_values')  # the target runs and its outputs are wrong: in shape, dtype or values
LOST = ('process_death', 'hang', 'out_of_memory')  # the conversion runs in a child, whose end is the evidence
CHILD_TIMEOUT_S = 600  # a child still converting then is a hang
MEMORY_MB = 4096  # an out-of-memory case's child may grow by this much
ORT_LEVELS = {'disabled': 'ORT_DISABLE_ALL', 'basic': 'ORT_ENABLE_BASIC', 'extended': 'ORT_ENABLE_EXTENDED', 'all': 'ORT_ENABLE_ALL'}  # ONNX Runtime's levels by convsmith's names: the GraphOptimizationLevel member of each


def load_tensor(rel):
    proto = onnx.TensorProto()
    with open(os.path.join(HERE, rel), "rb") as handle:
        proto.ParseFromString(handle.read())
    return np.array(numpy_helper.to_array(proto), copy=True)  # bfloat16 arrives as ml_dtypes.bfloat16


def ort_value(x):
    if x.dtype.name == "bfloat16":
        words = np.ascontiguousarray(x).view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))


def from_ort_value(value):
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    words = np.frombuffer(raw, dtype=np.uint16).reshape(value.shape())
    return (words.astype(np.uint32) << 16).view(np.float32)


def run_onnx(data, inputs, level="disabled"):
    """ONNX Runtime on DEVICE, one CPU thread, at an optimization level (as convsmith runs targets)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[level])
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


def transform(model):
    """The ONNX-to-ONNX converter under test."""
    import onnxslim
    model = onnxslim.slim(model, no_constant_folding=False)
    return model


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


def raised_types(exc):
    """The type names of `exc` and of the errors it was raised from: a library that wraps the error (torch.onnx's
    TorchExportError around torch.export's) still raises the one the case was filed for."""
    names = []
    while exc is not None and len(names) < 8:
        names.append(type(exc).__name__)
        exc = exc.__cause__ or exc.__context__
    return names


def report_crash(exc, expected):
    """What the conversion raised, beside what was expected: 1 when it is the error the case was filed for."""
    if SYMPTOM == "out_of_memory":
        shown = isinstance(exc, MemoryError) or "allocate memory" in str(exc) or "bad_alloc" in str(exc)
    else:
        shown = SYMPTOM not in DIVERGENCES + LOST and (EXPECTED_ERROR or type(exc).__name__) in raised_types(exc)
    traceback.print_exc()
    print(f"observed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    print(f"expected: {expected}")
    return outcome(shown)


def exit_status(main):
    """main's status (run in a child for a lost case); 3 when a library is missing, 2 when a case file is, 4 when
    main fails otherwise (an uncaught exception's own status, 1, would read as the bug)."""
    try:
        return in_child(main) if SYMPTOM in LOST else main()
    except ImportError as exc:  # the converter under test (onnxsim, onnxslim, ...) is not installed
        print(f"repro.py: cannot run: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:  # a file of the case folder is missing or unreadable
        print(f"repro.py: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
    except Exception:  # outside the step the bug is in (reading inputs, judging): a failure, but not this bug
        traceback.print_exc()
        print("repro.py: failed outside the conversion this case was filed for", file=sys.stderr)
        return 4


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


def convert_and_run(upstream, inputs):
    """An ONNX-to-ONNX tool: (its model's outputs, upstream.onnx's outputs)."""
    baseline = run_onnx(upstream, inputs)
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


if __name__ == "__main__":
    sys.exit(exit_status(main))
