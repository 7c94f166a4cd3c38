"""onnx-graphsurgeon: NVIDIA's ONNX graph editor (TensorRT's tools), in the sequence its users and Polygraphy's
`surgeon sanitize` run on a model before TensorRT: constant folding (ONNX Runtime evaluates the constant subgraphs,
its own code folds shape arithmetic), cleanup of what no output needs, and a topological sort."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import onnx

from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamChoices, UpstreamOptions
from fuzzer.support.quiet import library_output

# Its steps in the order they run; each fired where it changed the graph's nodes (the steps name no finer rewrite).
STEPS = ("fold_constants", "cleanup", "toposort")
PARTITIONING = ("none", "basic", "recursive")  # "none" is the library's None: the graph folded as one


@dataclass(frozen=True)
class GraphSurgeonOptions(UpstreamOptions):
    choices = UpstreamChoices(partitioning=PARTITIONING)
    fold_shapes: bool = True  # fold Shape and the arithmetic on it where the input's shape is static
    partitioning: str = "none"  # fold the graph as one, or part by part so that one failing part spares the rest

    @property
    def library_partitioning(self) -> str | None:
        """`partitioning` as fold_constants takes it."""
        return None if self.partitioning == "none" else self.partitioning


class GraphSurgeon(OnnxPassConverter[GraphSurgeonOptions]):
    name = "onnx-graphsurgeon"
    display_name = "onnx-graphsurgeon"
    project = "TensorRT (onnx-graphsurgeon)"
    distribution = "onnx-graphsurgeon"
    tracker = "https://github.com/NVIDIA/TensorRT/issues"
    libraries = ("onnx_graphsurgeon", "onnxruntime")
    distributions = ("torch", "onnx", "onnx-graphsurgeon", "onnxruntime")
    options_type = GraphSurgeonOptions

    def component(self, site: FaultSite) -> Component:
        """Its folding, cleanup and sort (one call chain) on the operator the bug is on."""
        return self.own_component(f"Graph.fold_constants / cleanup / toposort {site.named()}")

    def snippet(self, options: GraphSurgeonOptions) -> Snippet:
        return Snippet(("import onnx_graphsurgeon as gs",), _lines(options))

    def avoid_settings(self, options: GraphSurgeonOptions, hints: Hints) -> tuple[Setting, ...]:
        """Shape folding turned the other way; folding part by part instead of the graph as one."""
        shapes = replace(options, fold_shapes=not options.fold_shapes)
        parted = replace(options, partitioning="basic")
        return (Setting(f"fold_shapes={shapes.fold_shapes}", self.name, shapes.to_json(), "; ".join(_lines(shapes))),
                *((Setting("partitioning='basic'", self.name, parted.to_json(), "; ".join(_lines(parted))),)
                  if options.partitioning == "none" else ()))

    def rewrite_names(self) -> tuple[str, ...]:
        """Its three steps (the library lists no finer rewrites)."""
        return STEPS

    def fired(self, model: onnx.ModelProto, options: GraphSurgeonOptions) -> tuple[str, ...]:
        """The steps that changed the graph's nodes."""
        return self.transform_watched(model, options)[1]

    def transform_watched(self, model: onnx.ModelProto, options: GraphSurgeonOptions) -> tuple[
            onnx.ModelProto, tuple[str, ...]]:
        """Its call chain, one step at a time, with the steps that changed the nodes (their kinds and order)."""
        import onnx_graphsurgeon as gs
        fired: list[str] = []
        with library_output():
            graph = gs.import_onnx(model)
            for step, run in zip(STEPS, _steps(options), strict=True):
                before = _nodes(graph)
                run(graph)
                if _nodes(graph) != before:
                    fired.append(step)
            return gs.export_onnx(graph), tuple(fired)

    def transform(self, model: onnx.ModelProto, options: GraphSurgeonOptions) -> onnx.ModelProto:
        return self.transform_watched(model, options)[0]


def _steps(options: GraphSurgeonOptions) -> tuple[Callable[[Any], Any], ...]:
    return (lambda g: g.fold_constants(fold_shapes=options.fold_shapes, partitioning=options.library_partitioning),
            lambda g: g.cleanup(), lambda g: g.toposort())


def _nodes(graph: Any) -> tuple[str, ...]:
    return tuple(f"{node.op}:{','.join(t.name for t in node.outputs)}" for node in graph.nodes)


def _lines(options: GraphSurgeonOptions) -> tuple[str, ...]:
    return ("graph = gs.import_onnx(model)",
            f"graph.fold_constants(fold_shapes={options.fold_shapes}, partitioning={options.library_partitioning!r})"
            ".cleanup().toposort()", "model = gs.export_onnx(graph)")
