"""An exporter whose model ONNX Runtime runs at one optimization level (a case's cross-check, not a registered
converter): is the runtime's optimizer part of an exporter's divergence, or does it hide it?"""

from __future__ import annotations

import dataclasses

from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.ort_levels import LEVELS
from fuzzer.converters.runtime import run_model
from oracles.verdict import Stage


class AtLevel(Converter[ConverterOptions]):
    """`exporter`, with its model run at `level` instead of with optimizations off. It takes the exporter's name,
    options and stage, so a run that shows the exporter's bug has the exporter's signature."""

    def __init__(self, exporter: Converter, level: str) -> None:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
        self.exporter, self.level = exporter, level
        # Instance attributes shadow the class-level ones: this wrapper stands in for the exporter it wraps.
        self.name = exporter.name
        self.libraries, self.distributions = exporter.libraries, exporter.distributions
        self.distribution = exporter.distribution
        self.options_type = exporter.options_type
        self.divergence_stage = exporter.divergence_stage
        self.display_name = exporter.display_name
        self.target_level = level

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        run = self.exporter.convert(source, options)
        if self.level == "disabled" or run.model is None:
            return run
        steps = Steps()  # optimizers run when the session loads: a failure there is graph optimization
        outputs, dtypes = run_model(run.model, source, steps, self.level, load_stage=Stage.GRAPH_OPTIMIZATION)
        timings = {**run.timings, **{f"{self.level}_{k}": v for k, v in steps.timings.items()}}
        return dataclasses.replace(run, outputs=outputs, output_dtypes=dtypes, timings=timings)
