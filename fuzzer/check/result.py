"""What a check produces and is tuned by: its options, the expected outputs, the result, and its stopwatch."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.culprit import Culprit
from oracles.judgement import INVALID_INPUTS as INVALID_INPUTS  # where fuzzer/ reads it
from oracles.taxonomy import Failure
from oracles.verdict import Verdict


@dataclass(frozen=True)
class CheckOptions:
    """Pipeline knobs (not converter options)."""

    rerun: bool = True  # rerun a divergence once to tell flaky from stable
    locate: bool = True  # bisect graph prefixes for the first diverging operator
    culprit: bool = True  # let a converter that bisects its rewrites name the guilty one (capabilities.py)
    input_budget_s: float = 1.0
    # The follow-ups stop converting once this long has gone into them: a campaign's worker is killed as hung at its
    # timeout, and a slow converter's locate and rerun (onnx2tf running its onnxsim pass) would otherwise be filed
    # as the converter's hang.
    follow_up_budget_s: float = 20.0


FULL_CHECK = CheckOptions()


@dataclass(frozen=True)
class Expected:
    """What the target is judged against: eager float32 outputs and the float64 reference, as numpy."""

    source: Source
    eager: tuple[np.ndarray, ...]
    reference: tuple[np.ndarray, ...]
    valid_inputs: bool = True
    values: str = "uniform"  # the value strategy of the inputs (generators/values.py)
    # A dynamic export's source at its second shape, judged the same way (fuzzer/check/dynamic.py); None for a static
    # export, or when the graph has no other shape.
    second: Expected | None = None
    # The float32 and float64 values the oracle reads to settle what torch leaves unspecified (source.settling_inputs),
    # kept from the eager and float64 runs; None: not kept, the oracle runs the graph again when it needs them.
    settling: Mapping[str, np.ndarray] | None = None
    settling64: Mapping[str, np.ndarray] | None = None
    # The dynamic-shape plan of this source, made by the first dynamic check of it and shared by the others, as
    # Source.exports shares upstream exports (fuzzer/check/dynamic.planned). A copy made by replace starts empty.
    plans: dict[str, Expected] = field(default_factory=dict, init=False, compare=False, repr=False)


@dataclass(frozen=True)
class CheckResult:
    """A verdict plus what a bug case needs: per-stage timings, the target run, the failure traceback."""

    verdict: Verdict
    timings: Mapping[str, float]
    expected: Expected | None = None
    target: TargetRun | None = None
    failure: Failure | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    second: TargetRun | None = None  # a dynamic export's model run at the second shape
    failed_model: bytes | None = None  # the model a conversion that failed after writing it had written
    culprit: Culprit | None = None  # the rewrite the converter's bisection named (its labels are on the verdict)


Prepared = Expected | CheckResult  # a settled source, or the source's own failure (the same for every converter)


@contextmanager
def timer(timings: dict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block takes to `timings[name]`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start


def add_timings(timings: dict[str, float], steps: Mapping[str, float], prefix: str = "") -> None:
    """Add each step's seconds to `timings` under `prefix + name`."""
    for name, seconds in steps.items():
        timings[prefix + name] = timings.get(prefix + name, 0.0) + seconds


def book_inner(timings: dict[str, float], follow_up_name: str, inner: Mapping[str, float]) -> None:
    """Move the steps timed inside a follow-up (the converter's export, the runtime, the oracle) out of its own
    timer into "<follow-up>.<step>" entries, so time spent converting again is booked as conversion."""
    add_timings(timings, inner, f"{follow_up_name}.")
    timings[follow_up_name] = max(timings[follow_up_name] - sum(inner.values()), 0.0)
