"""onnxscript-optimizer: onnxscript's optimizer (`onnxscript.optimizer.optimize`) called on an ONNX model, as its
users call it on a model of any origin: constant folding, its default rewrite rules and cleanup passes. The dynamo
exporter runs the same optimizer on its own export only; here it meets the TorchScript exporter's, tf2onnx's and the
native models too."""

from __future__ import annotations

from dataclasses import dataclass, replace

import onnx

from fuzzer.converters import onnxscript_rules
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.rewrite_matches import Fired
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.torch_onnx_dynamo import ONNXSCRIPT_TRACKER
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions, UpstreamOptionsT
from fuzzer.support.quiet import library_output


@dataclass(frozen=True)
class OnnxscriptOptimizerOptions(UpstreamOptions):
    space = {"num_iterations": (1, 2)}
    num_iterations: int = 2  # its fold-rewrite-cleanup loop, at most this many times
    onnx_shape_inference: bool = True  # ONNX's shape inference on each node it folds


class OnnxscriptTool(OnnxPassConverter[UpstreamOptionsT]):
    """What onnxscript's tools share: their project, tracker and the distributions a case's versions name."""

    project = "onnxscript"
    distribution = "onnxscript"
    tracker = ONNXSCRIPT_TRACKER
    distributions = ("torch", "onnx", "onnxscript", "onnx-ir", "onnxruntime")


class OnnxscriptOptimizer(OnnxscriptTool[OnnxscriptOptimizerOptions]):
    name = "onnxscript-optimizer"
    display_name = "onnxscript optimizer"
    libraries = ("onnxscript", "onnxscript.optimizer", "onnx_ir")
    options_type = OnnxscriptOptimizerOptions

    def component(self, site: FaultSite) -> Component:
        """Its optimizer (folding, rewrite rules and cleanup run as one call) on the operator the bug is on."""
        return self.own_component(f"optimizer (onnxscript.optimizer.optimize) {site.named()}")

    def snippet(self, options: OnnxscriptOptimizerOptions) -> Snippet:
        return Snippet(("import onnxscript.optimizer",), (_call(options),))

    def avoid_settings(self, options: OnnxscriptOptimizerOptions, hints: Hints) -> tuple[Setting, ...]:
        """Its loop run once instead of twice; ONNX's shape inference while folding turned the other way."""
        once = replace(options, num_iterations=1)
        other = replace(options, onnx_shape_inference=not options.onnx_shape_inference)
        return (*((Setting("num_iterations=1", self.name, once.to_json(), _call(once)),)
                  if options.num_iterations != 1 else ()),
                Setting(f"onnx_shape_inference={other.onnx_shape_inference}", self.name, other.to_json(),
                        _call(other)))

    def rewrite_names(self) -> tuple[str, ...]:
        """Constant folding, every default rewrite rule and the cleanup passes (the dynamo exporter's list)."""
        return onnxscript_rules.rule_names()

    def fired(self, model: onnx.ModelProto, options: OnnxscriptOptimizerOptions) -> tuple[str, ...]:
        """The rules and passes that change `model`, replayed one at a time in the optimizer's order."""
        with library_output():
            return onnxscript_rules.fired(model)

    def fired_rewrites(self, received: onnx.ModelProto, made: onnx.ModelProto, options: OnnxscriptOptimizerOptions,
                       watched: tuple[str, ...] | None) -> Fired:
        """`fired`'s rules and passes, each with the classes of the nodes it changed."""
        with library_output():
            return onnxscript_rules.replay(received)

    def transform(self, model: onnx.ModelProto, options: OnnxscriptOptimizerOptions) -> onnx.ModelProto:
        import onnxscript.optimizer

        with library_output():
            return onnxscript.optimizer.optimize(model, num_iterations=options.num_iterations,
                                                 onnx_shape_inference=options.onnx_shape_inference)


def _call(options: OnnxscriptOptimizerOptions) -> str:
    return (f"model = onnxscript.optimizer.optimize(model, num_iterations={options.num_iterations}, "
            f"onnx_shape_inference={options.onnx_shape_inference})")


class OnnxscriptOrtFusions(OnnxscriptTool[UpstreamOptions]):
    """onnxscript-ort-fusions: onnxscript's fusions for ONNX Runtime (`onnxscript.rewriter.ort_fusions`), which fold
    and rewrite a model, then fuse Gelu, RMS and skip normalizations, rotary embeddings and attention into ONNX
    Runtime's contrib operators (FusedMatMul and others)."""

    name = "onnxscript-ort-fusions"
    display_name = "onnxscript ort_fusions"
    libraries = ("onnxscript", "onnxscript.rewriter.ort_fusions", "onnx_ir")
    options_type = UpstreamOptions
    onnx_checked = False  # it writes ONNX Runtime's contrib operators

    def component(self, site: FaultSite) -> Component:
        """Its fusions for ONNX Runtime (one call) on the operator the bug is on."""
        return self.own_component(f"fusions for ONNX Runtime (onnxscript.rewriter.ort_fusions.optimize_for_ort) "
                                  f"{site.named()}")

    def snippet(self, options: UpstreamOptions) -> Snippet:
        return Snippet(("import onnx_ir as ir", "from onnxscript.rewriter.ort_fusions import optimize_for_ort"),
                       ("ir_model, _ = optimize_for_ort(ir.serde.deserialize_model(model))",
                        "model = ir.serde.serialize_model(ir_model)"))

    def rewrite_names(self) -> tuple[str, ...]:
        """The fusions `optimize_for_ort` counts, read from its own count on a one-node model."""
        return tuple(sorted(_ort_fusions(_one_node_model())[1]))

    def fired(self, model: onnx.ModelProto, options: UpstreamOptions) -> tuple[str, ...]:
        """The fusions its own count says applied."""
        return self.transform_watched(model, options)[1]

    def transform_watched(self, model: onnx.ModelProto, options: UpstreamOptions) -> tuple[
            onnx.ModelProto, tuple[str, ...]]:
        """Its call, and the fusions it counts as applied."""
        made, counts = _ort_fusions(model)
        return made, tuple(sorted(name for name, count in counts.items() if count))

    def transform(self, model: onnx.ModelProto, options: UpstreamOptions) -> onnx.ModelProto:
        return _ort_fusions(model)[0]


def _ort_fusions(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    import onnx_ir as ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    with library_output():
        made, counts = optimize_for_ort(ir.serde.deserialize_model(model))
        return ir.serde.serialize_model(made), dict(counts)


def _one_node_model() -> onnx.ModelProto:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
