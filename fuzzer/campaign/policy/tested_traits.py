"""The traits of one test beyond its graph's own (traits.py): those of the model an ONNX tool is given, read off the
upstream export the check shares, and the graph's and the model's under the converter's trait setting.

A model trait is known once the upstream export is made. The worker makes it before the check (upstream_fallback.py,
the check then finds it made), so a test can be skipped for a filed bug that a model trait covers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx

from fuzzer.campaign.policy.model_traits import model_traits
from fuzzer.campaign.policy.traits import graph_traits, trait_token, under_setting
from fuzzer.check.result import Expected, Prepared
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import TraitSetting
from fuzzer.converters.conversion import Steps, UpstreamError
from fuzzer.converters.upstream import cached_upstream, export_upstream
from generators.ir import Graph


def traits_of_test(graph: Graph, converter: Converter, options: Mapping[str, Any], prepared: Prepared
                   ) -> frozenset[str]:
    """The trait tokens of testing `graph` with `converter` under `options`, beyond the graph's own: the model's,
    where its upstream export was made (given_model), and the graph's and model's under the trait setting."""
    data = given_model(options, prepared)
    model = model_traits(onnx.load_from_string(data)) if data is not None else frozenset()
    setting = converter.trait_setting(converter.options(options)) if isinstance(converter, TraitSetting) else ""
    return frozenset(trait_token(detail) for detail in model | under_setting(setting, graph_traits(graph) | model))


def given_model(options: Mapping[str, Any], prepared: Prepared) -> bytes | None:
    """The upstream model an ONNX tool's test was given, if its export was made and valid (runnable or not)."""
    if "upstream" not in options or not isinstance(prepared, Expected):
        return None
    return cached_upstream(prepared.source, options["upstream"], options["opset"], runnable=False)


def upstream_model(options: Mapping[str, Any], prepared: Prepared) -> tuple[bytes | None, dict[str, float]]:
    """The upstream model an ONNX tool's test is given, if it exports, validates and runs; made here where not made
    yet, with the timings of making it. None for a converter that starts from no upstream, or a source that failed."""
    if "upstream" not in options or not isinstance(prepared, Expected):
        return None, {}
    source, upstream, opset = prepared.source, options["upstream"], options["opset"]
    steps = Steps()
    if (upstream, opset) not in source.exports:
        try:
            export_upstream(source, upstream, opset, steps)
        except UpstreamError:  # kept in source.exports: the check reports it as the upstream's failure
            pass
    return cached_upstream(source, upstream, opset), dict(steps.timings)
