"""Running an ONNX model on ONNX Runtime (optimizations off) with numpy feeds, and judging outputs with the oracle at
the zoo's tolerance for deep models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fuzzer.converters.runtime import make_session
from generators.zoo.spec import ToleranceClass
from oracles.compare import DEFAULT_TOLERANCES, FLOAT_DTYPES, STORAGE, OutputComparison, Tolerance, compare

# A user's model is a deep stack, as the zoo's are: its float outputs are judged at the zoo's DEEP class.
MODEL_TOLERANCE = Tolerance(rtol=ToleranceClass.DEEP.rtol, atol=ToleranceClass.DEEP.atol)
# A float64 model is held to float64: ten times its default tolerance for a deep stack, well below float32's rounding.
FLOAT64_TOLERANCE = Tolerance(rtol=1e-8, atol=1e-10)


def run_onnx(data: bytes, feeds: Mapping[str, np.ndarray], outputs: Sequence[str] | None = None
             ) -> tuple[np.ndarray, ...]:
    """The model's outputs (or the named values) under ONNX Runtime with optimizations off; inputs it does not take
    are left out of the feed."""
    session = make_session(data)
    wanted = {i.name for i in session.get_inputs()}
    return tuple(np.asarray(o) for o in session.run(None if outputs is None else list(outputs),
                                                     {k: v for k, v in feeds.items() if k in wanted}))


def dtype_of(x: np.ndarray) -> str:
    """The oracle's dtype name of an array ('?' prefix for one it does not compare)."""
    name = str(x.dtype)
    return name if name in STORAGE else f"?{name}"


def tolerance_for(dtype: str) -> Tolerance:
    if dtype == "float64":
        return FLOAT64_TOLERANCE
    return MODEL_TOLERANCE if dtype in FLOAT_DTYPES else DEFAULT_TOLERANCES.get(dtype, MODEL_TOLERANCE)


def judge(actual: np.ndarray, expected: np.ndarray) -> OutputComparison:
    """One value of the converted model against the source's, at the model tolerance of the source's dtype."""
    dtype = dtype_of(expected)
    if dtype.startswith("?"):  # a dtype the oracle does not store: compared as float64
        return compare(np.asarray(actual, np.float64), np.asarray(expected, np.float64), "float64", MODEL_TOLERANCE)
    return compare(np.asarray(actual), expected, dtype, tolerance_for(dtype))


def judge_all(actuals: Sequence[np.ndarray], expecteds: Sequence[np.ndarray]) -> tuple[OutputComparison, ...]:
    return tuple(judge(a, e) for a, e in zip(actuals, expecteds, strict=True))
