"""onnxslim: pattern fusion, constant folding and dead-code removal on ONNX graphs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import onnx

from fuzzer.converters.describe import Snippet
from fuzzer.converters.edge_classes import EdgeClass, Match, class_names, match_labels, scope_of
from fuzzer.converters.rewrite_matches import Fired, typed
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.support.quiet import library_output


@dataclass(frozen=True)
class OnnxSlimOptions(UpstreamOptions):
    no_constant_folding: bool = False


class OnnxSlim(OnnxPassConverter[OnnxSlimOptions]):
    name = "onnxslim"
    display_name = "onnxslim"
    project = "onnxslim"
    distribution = "onnxslim"
    tracker = "https://github.com/inisis/OnnxSlim/issues"

    def snippet(self, options: OnnxSlimOptions) -> Snippet:
        return Snippet(("import onnxslim",), (
            f"model = onnxslim.slim(model, no_constant_folding={options.no_constant_folding})",))
    libraries = ("onnxslim", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxslim")
    options_type = OnnxSlimOptions

    def avoid_settings(self, options: OnnxSlimOptions, hints: Hints) -> tuple[Setting, ...]:
        """onnxslim's constant folding off (the one skip flag its options take)."""
        if options.no_constant_folding:
            return ()
        return (Setting("onnxslim's constant folding off", self.name,
                        {**options.to_json(), "no_constant_folding": True},
                        "model = onnxslim.slim(model, no_constant_folding=True)"),)

    def rewrite_names(self) -> tuple[str, ...]:
        """onnxslim's registered fusion and elimination patterns."""
        from onnxslim.core.pattern.registry import get_fusion_patterns

        return tuple(get_fusion_patterns())

    def classes_out_of_reach(self) -> Mapping[str, str]:
        """The If/Loop bodies: `replay` asks the matchers on the main graph's nodes only."""
        return {EdgeClass.IN_SUBGRAPH.value: "not measured: the replay asks slim's matchers on the main graph only"}

    def fired(self, model: onnx.ModelProto, options: OnnxSlimOptions) -> tuple[str, ...]:
        """The patterns onnxslim's own matchers rewrite in the model it received, each asked alone after the shape
        inference and constant folding slim runs between and before its fusions (a Constant node's value is a
        constant to its matchers only then, and some match on inferred shapes); its dead-code and subexpression
        passes are not counted."""
        return self.replay(model, options).names

    def fired_rewrites(self, received: onnx.ModelProto, made: onnx.ModelProto, options: OnnxSlimOptions,
                       watched: tuple[str, ...] | None) -> Fired:
        """`fired`'s patterns, each with the classes of the nodes its matcher matched."""
        return self.replay(received, options)

    def replay(self, model: onnx.ModelProto, options: OnnxSlimOptions) -> Fired:
        """The patterns `fired` names, with the classes of the nodes each matched in the model slim's matchers read
        (its types inferred)."""
        import onnxslim.third_party.onnx_graphsurgeon as gs
        from onnxslim.core import shape_infer
        from onnxslim.core.pattern.registry import get_fusion_patterns

        with library_output():
            base = gs.import_onnx(shape_infer(model)).toposort()
        if not options.no_constant_folding:
            with library_output():
                base.fold_constants().cleanup().toposort()
        fired: dict[str, tuple[str, ...]] = {}
        graph, read = base.copy(), _MatchReader(lambda: gs.export_onnx(base.copy()))
        for name, matchers in get_fusion_patterns().items():
            matched = _rewrites(graph, matchers)
            if matched is not None:
                fired[name] = class_names(read.classes(matched))
                graph = base.copy()  # the rewrite changed what the next pattern reads
        return Fired(tuple(fired), fired)

    def transform(self, model: onnx.ModelProto, options: OnnxSlimOptions) -> onnx.ModelProto:
        import onnxslim

        return onnxslim.slim(model, no_constant_folding=options.no_constant_folding)


def _rewrites(graph: Any, matchers: Any) -> frozenset[str] | None:
    """Where one of a pattern's matchers rewrites a node of `graph`, as slim's find_matches would (a match whose
    tensors in between are no graph outputs, and a rewrite that returns its replacement or changes the graph in
    place: FusionGemmMul and a few others return nothing), the output names of the nodes it matched; else None."""
    outputs = {id(tensor) for tensor in graph.outputs}
    for node in reversed(graph.nodes):
        for matcher in matchers:
            if not matcher.applies_to(graph.opset) or not matcher.match(node):
                continue
            if matcher.has_intermediate_graph_output(outputs):
                continue
            matched = _matched_outputs(matcher)
            before = _fingerprint(graph)
            if matcher.rewrite(opset=graph.opset) or _fingerprint(graph) != before:
                return matched
    return None


def _matched_outputs(matcher: Any) -> frozenset[str]:
    """The first output name of each node a matcher matched (its pattern's nodes, inputs and outputs aside)."""
    names = set()
    for descriptor in matcher.pattern.nodes:
        node = getattr(matcher, descriptor.name, None) if descriptor.op not in ("input", "output") else None
        if node is not None and getattr(node, "outputs", None):
            names.add(node.outputs[0].name)
    return frozenset(names)


class _MatchReader:
    """The classes of matched nodes, read from the model slim's matchers start from (exported and typed once, when
    a pattern first fires)."""

    def __init__(self, export: Callable[[], onnx.ModelProto]) -> None:
        self.export = export
        self.model: onnx.ModelProto | None = None

    def classes(self, outputs: frozenset[str]) -> frozenset[str]:
        """The labels (edge_classes.match_labels) of the nodes whose first outputs are `outputs`."""
        if self.model is None:
            self.model = typed(self.export())
        nodes = tuple(node for node in self.model.graph.node if node.output and node.output[0] in outputs)
        return match_labels((Match(nodes, scope_of(self.model.graph)),))


def _fingerprint(graph: Any) -> list[tuple[str, tuple[str, ...], tuple[str, ...], str]]:
    return [(n.op, tuple(t.name for t in n.inputs), tuple(t.name for t in n.outputs), repr(n.attrs))
            for n in graph.nodes]
