"""The one entry point of a check: graph + seed (or a settled source) -> converter -> oracle -> follow-ups.

The worker, `convsmith check`, the probe, the reducer and replay all come through here: `prepare` settles the
source once (materialize, valid inputs, eager and float64 runs; a dynamic export's second shape when first needed),
`check_prepared` judges it under one converter and follows a divergence up. `run_check` and `check_source` are the
two in one call.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from fuzzer.check.dynamic import planned
from fuzzer.check.follow_up import follow_up
from fuzzer.check.judge import judge
from fuzzer.check.result import FULL_CHECK, CheckOptions, CheckResult, Expected, Prepared
from fuzzer.check.source import expect, prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source
from fuzzer.converters.options import ConverterOptions
from fuzzer.support.errors import CannotRun
from generators.ir import Graph
from generators.values import ValueStrategy

ConverterOptionsLike = ConverterOptions | Mapping[str, Any] | None


class ConverterUnavailable(CannotRun):
    """The converter's library does not import here; the message says why (one line, exit 3)."""


def available_converter(name: str, registry: Mapping[str, Converter] = CONVERTERS) -> Converter:
    """The converter `name` of `registry`; ConverterUnavailable when its library does not import here."""
    converter = registry[name]
    ok, reason = converter.availability()
    if not ok:
        raise ConverterUnavailable(f"converter {name} is unavailable: {reason}")
    return converter


def check_prepared(prepared: Prepared, converter: Converter, options: ConverterOptionsLike = None,
                   check_options: CheckOptions = FULL_CHECK, filed: Callable[[str], bool] | None = None
                   ) -> CheckResult:
    """Judge a prepared source under `converter` and follow a divergence up (not rerunning one whose signature
    `filed` knows); a failed source gives its own verdict under this converter's name. The converter's options are
    recorded in the result."""
    opts = converter.options(options)
    if isinstance(prepared, CheckResult):
        verdict = dataclasses.replace(prepared.verdict, converter=converter.name)
        return dataclasses.replace(prepared, verdict=verdict, options=opts.to_json())
    start = time.perf_counter()
    timings: dict[str, float] = {}
    if getattr(opts, "dynamic", False):  # preparation: the second shape, its inputs and its source runs
        prepared = planned(prepared, timings)
    judged = judge(prepared, converter, opts, timings)
    # What no step of the conversion or the judging timed (a failed conversion brings its steps with its error).
    timings["converter_other"] = max(time.perf_counter() - start - sum(timings.values()), 0.0)
    result = follow_up(judged, converter, opts, check_options, filed)
    return dataclasses.replace(result, options=opts.to_json())


def run_check(graph: Graph, seed: int, converter_name: str, options: ConverterOptionsLike = None,
              check_options: CheckOptions = FULL_CHECK, device: str = "cpu",
              values: ValueStrategy = ValueStrategy.UNIFORM, registry: Mapping[str, Converter] = CONVERTERS
              ) -> CheckResult:
    """The verdict of one graph under one converter of `registry`, with timings and artifacts; the source and ONNX
    Runtime run on `device` (cpu or cuda); `values` is how the inputs are drawn."""
    converter = available_converter(converter_name, registry)
    opts = converter.options(options)
    timings: dict[str, float] = {}
    prepared = prepare(graph, seed, timings, check_options.input_budget_s, device, values)
    result = check_prepared(prepared, converter, opts, check_options)
    return dataclasses.replace(result, timings={**timings, **result.timings})


def check_source(source: Source, converter_name: str, options: ConverterOptionsLike = None,
                 check_options: CheckOptions = FULL_CHECK) -> CheckResult:
    """Like run_check, for a source whose module and inputs are already settled (a saved case, a prefix)."""
    timings: dict[str, float] = {}
    expected = expect(source, timings)
    result = check_prepared(expected, available_converter(converter_name), options, check_options)
    return dataclasses.replace(result, timings={**timings, **result.timings})


__all__ = ["CheckOptions", "CheckResult", "ConverterUnavailable", "Expected", "available_converter",
           "check_prepared", "check_source", "prepare", "run_check"]
