"""The traits of one test beyond its graph's own (traits.py): those of the model an ONNX tool is given, read off the
upstream export the check shares, and the graph's and the model's under the converter's trait setting.

A model trait is known only once the upstream export is made. That export is made once per source and shared by
the ONNX tools (upstream.export_upstream), so reading its traits after a test costs a parse; before a test (to skip
it for a filed bug that a model trait covers) the export is made here, and the check then finds it made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx

from fuzzer.campaign.novelty import AVOID_FOR, Demotion
from fuzzer.campaign.traits import graph_traits, is_model_trait, model_traits, trait_token, under_setting
from fuzzer.check.result import Expected, Prepared
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Steps, UpstreamError
from fuzzer.converters.upstream import cached_upstream, export_upstream
from generators.ir import Graph


def traits_of_test(graph: Graph, converter: Converter, options: Mapping[str, Any], prepared: Prepared,
                export: bool = False) -> tuple[frozenset[str], dict[str, float]]:
    """(The trait tokens of testing `graph` with `converter` under `options`, beyond the graph's own; the timings of
    the upstream export made here, where `export` asks for it and none was made yet)."""
    made = upstream_model(converter, options, prepared, export)
    model = model_traits(onnx.load_from_string(made[0])) if made[0] is not None else frozenset()
    setting = converter.trait_setting(converter.options(options))
    details = model | under_setting(setting, graph_traits(graph) | model)
    return frozenset(trait_token(detail) for detail in details), made[1]


def upstream_model(converter: Converter, options: Mapping[str, Any], prepared: Prepared, export: bool
                   ) -> tuple[bytes | None, dict[str, float]]:
    """The upstream model an ONNX tool's test is (or was) given, if exported and valid, made here when `export`;
    with the timings of making it. None for a converter that starts from no upstream, or a source that failed."""
    if "upstream" not in options or not isinstance(prepared, Expected):
        return None, {}
    source, upstream, opset = prepared.source, options["upstream"], options["opset"]
    steps = Steps()
    if export and (upstream, opset) not in source.exports:
        try:
            export_upstream(source, upstream, opset, steps)
        except UpstreamError:  # kept in source.exports: the check reports it as the upstream's failure
            pass
    return cached_upstream(source, upstream, opset), dict(steps.timings)


def avoids_model_traits(converter: str, demoted: Sequence[Demotion]) -> bool:
    """Whether a filed bug of `converter` is covered by a trait of the model it is given: its tests must then export
    their upstream before they run, to be skipped where they hold it."""
    kind = AVOID_FOR + converter
    return any(k == kind and is_model_trait(token) for k, token, _ in demoted)
