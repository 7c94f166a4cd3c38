"""An ONNX tool's test whose drawn upstream cannot give it a model starts from another upstream instead.

The ONNX tools of a unit share one drawn upstream, mostly the dynamo exporter. Where its export of the graph fails
(its own bug, filed by its own test), every ONNX tool of the unit used to end at the source, testing nothing: in the
first 40 minutes of an hour, over a third of their tests. Where the upstream is known not to take the graph (a
demoted setting it cannot avoid, settings.py; a pair its probe found unsupported), the test was skipped. Now the
export is made before the check (which then finds it made), and where the upstream fails or is known to, the native
model, else the first other exporter not known to refuse the graph, is tried (WorkerConfig.upstream_after); the test
is labelled with the upstreams left behind. A pinned upstream, or fixed settings, are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuzzer.campaign.policy.novelty import Demotion
from fuzzer.campaign.policy.settings import settled_options
from fuzzer.campaign.policy.tested_traits import upstream_model
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.result import Expected, Prepared, add_timings
from fuzzer.converters.base import Converter
from generators.ir import Graph

UPSTREAM_AFTER = "upstream-after"  # label of a test that starts from another upstream: upstream-after:LEFT,LEFT


def chosen_options(config: WorkerConfig, converter: Converter, seed: int, graph: Graph, prepared: Prepared,
                   demoted: Sequence[Demotion]) -> tuple[dict[str, Any], str | None, list[str], dict[str, float]]:
    """(The settled options of `converter`'s test of `seed`; the known root cause that skips it, else None; the
    upstreams left behind, each failing or known to fail on the graph; the timings of the exports made here). Where
    no other upstream gives a model, the drawn options as settled: the test then ends as their upstream makes it."""
    drawn = settled_options(converter, config.options_for(converter, seed, graph, demoted), graph, seed, demoted)
    if "upstream" not in drawn[0] or not isinstance(prepared, Expected):
        return (*drawn, [], {})
    (options, cause), left = drawn, []
    timings: dict[str, float] = {}
    while True:
        if cause is None and not config.known_unsupported(graph, converter.name, options) \
                and not config.inexpressible(graph, converter, options):
            made, more = upstream_model(options, prepared)
            add_timings(timings, more)
            if made is not None:
                return options, None, left, timings
        left.append(options["upstream"])
        other = config.upstream_after(converter, seed, graph, left)
        if other is None:
            return (*drawn, [], timings)
        options, cause = settled_options(converter, other, graph, seed, demoted)
