"""The verdict of a repro.py: outputs compared as convsmith compares them, and the exit status that follows."""
import traceback

import numpy as np

from fuzzer.cases.harness.head import (
    DIVERGENCES,
    EXPECTED_ERROR,
    LOST,
    OUTPUT_DTYPES,
    OUTPUT_NAMES,
    SYMPTOM,
    TOLERANCES,
)


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
