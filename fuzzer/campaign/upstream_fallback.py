"""An ONNX tool's test whose drawn upstream fails to export its graph starts from another upstream instead.

The ONNX tools of a unit share one drawn upstream, mostly the dynamo exporter. Where its export of the graph fails
(its own bug, filed by its own test), every ONNX tool of the unit used to end at the source, testing nothing: in an
hour, a fifth of their tests. The export is made before the check (the check then finds it made); where it failed,
the native model or another exporter is tried (WorkerConfig.upstream_after), and the test is labelled with the
upstreams that failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuzzer.campaign.tested_traits import upstream_model
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.result import Expected, Prepared
from fuzzer.converters.base import Converter
from generators.ir import Graph

UPSTREAM_AFTER = "upstream-after"  # label of a test that starts from another upstream: upstream-after:FAILED,FAILED


def exporting_options(config: WorkerConfig, converter: Converter, seed: int, graph: Graph, options: Mapping[str, Any],
                      prepared: Prepared) -> tuple[dict[str, Any], list[str], dict[str, float]]:
    """(`options`, or those of the first other upstream whose export of the source succeeds where theirs fails; the
    upstreams that failed before it; the timings of the exports made here). `options` as they are where no other
    upstream is allowed or exports the source: the check then reports their upstream's failure."""
    if "upstream" not in options or not isinstance(prepared, Expected):
        return dict(options), [], {}
    made, timings = upstream_model(options, prepared, export=True)
    failed: list[str] = []
    chosen = dict(options)
    while made is None:
        failed.append(chosen["upstream"])
        other = config.upstream_after(converter, seed, graph, failed)
        if other is None:
            return dict(options), [], timings
        made, more = upstream_model(other, prepared, export=True)
        for timer, seconds in more.items():
            timings[timer] = timings.get(timer, 0.0) + seconds
        chosen = other
    return chosen, failed, timings
