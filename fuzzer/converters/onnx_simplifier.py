"""onnxsim: onnx-simplifier (constant folding and graph cleanup via onnxoptimizer and shape inference)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx

from fuzzer.converters.describe import Snippet
from fuzzer.converters.rewrite_matches import ClassTracker, Fired
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions

CONSTANT_FOLDING = "constant_folding"  # onnxsim's own step beside the optimizer passes, named as its flag is
FUSE_BN = "fuse_bn_into_conv"  # the pass `skip_fuse_bn` skips


@dataclass(frozen=True)
class OnnxSimOptions(UpstreamOptions):
    perform_optimization: bool = True
    skip_fuse_bn: bool = False


class OnnxSim(OnnxPassConverter[OnnxSimOptions]):
    name = "onnxsim"
    display_name = "onnxsim"
    project = "onnxsim"
    distribution = "onnxsim"
    tracker = "https://github.com/daquexian/onnx-simplifier/issues"

    def snippet(self, options: OnnxSimOptions) -> Snippet:
        return Snippet(("import onnxsim",), (
            f"model, _ = onnxsim.simplify(model, check_n=0, perform_optimization={options.perform_optimization}, "
            f"skip_fuse_bn={options.skip_fuse_bn})",))
    libraries = ("onnxsim", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxsim")
    options_type = OnnxSimOptions

    def avoid_settings(self, options: OnnxSimOptions, hints: Hints) -> tuple[Setting, ...]:
        """The batch-norm fusion skipped, then onnxsim's optimizer off altogether (constant folding stays)."""
        data = options.to_json()
        skip = (Setting("onnxsim's fuse_bn_into_conv skipped", self.name, {**data, "skip_fuse_bn": True},
                        "model, _ = onnxsim.simplify(model, skip_fuse_bn=True)"),) if not options.skip_fuse_bn else ()
        off = (Setting("onnxsim's optimizer passes off", self.name, {**data, "perform_optimization": False},
                       "model, _ = onnxsim.simplify(model, perform_optimization=False)"),
               ) if options.perform_optimization else ()
        return (*skip, *off)

    def rewrite_names(self) -> tuple[str, ...]:
        """onnxsim's default optimizer passes (as `onnxsim --list-default-optimizers` lists them), and its constant
        folding."""
        from onnxsim import onnx_simplifier

        return (*(name for name in onnx_simplifier.C._list_optimizers() if name != "nop"), CONSTANT_FOLDING)

    def fired(self, model: onnx.ModelProto, options: OnnxSimOptions) -> tuple[str, ...]:
        """The passes that change the graph, each run alone in order on the previous one's output through onnxsim's
        own core (the one call `transform` makes runs them together, to a fixed point), then constant folding."""
        return self.replay(model, options).names

    def fired_rewrites(self, received: onnx.ModelProto, made: onnx.ModelProto, options: OnnxSimOptions,
                       watched: tuple[str, ...] | None) -> Fired:
        """`fired`'s passes, each with the classes of the nodes it changed."""
        return self.replay(received, options)

    def replay(self, model: onnx.ModelProto, options: OnnxSimOptions) -> Fired:
        """The passes run one at a time as `fired` runs them, with the classes of what each changed."""
        names = self.rewrite_names()
        run = _single_pass_runner(names[:-1])
        passes = [n for n in names[:-1] if options.perform_optimization and not (options.skip_fuse_bn and n == FUSE_BN)]
        fired, current = [], run(model.SerializeToString(), None, False)
        graph, tracker = _graph(current), ClassTracker(onnx.load_from_string(current))
        for name in (*passes, CONSTANT_FOLDING):
            current = run(current, None, True) if name == CONSTANT_FOLDING else run(current, name, False)
            graph, before = _graph(current), graph
            if graph != before:
                fired.append(name)
                tracker.step(name, onnx.load_from_string(current))
        return tracker.fired(tuple(fired))

    def transform(self, model: onnx.ModelProto, options: OnnxSimOptions) -> onnx.ModelProto:
        import onnxsim

        # check_n=0: onnxsim's own output check would run ORT inside this stage; the oracle does it instead.
        simplified, _ = onnxsim.simplify(model, check_n=0, perform_optimization=options.perform_optimization,
                                         skip_fuse_bn=options.skip_fuse_bn)
        return simplified


def _graph(data: bytes) -> bytes:
    """A model's graph alone: onnxsim adds its bookkeeping to the model's metadata on every call."""
    return onnx.load_from_string(data).graph.SerializeToString()


def _single_pass_runner(names: tuple[str, ...]) -> Callable[[bytes, str | None, bool], bytes]:
    """onnxsim's core with every default pass skipped but `only`, folding constants or not. The core is called
    directly: the public `simplify` costs some 20 ms a call around it, forty calls a test."""
    from onnxsim import onnx_simplifier

    executor = onnx_simplifier._get_model_executor(None)

    def run(data: bytes, only: str | None, fold: bool) -> bytes:
        skipped = [name for name in names if name != only]
        return onnx_simplifier.C.simplify(executor, data, skipped, fold, True, 1 << 30, None, None, True, False,
                                          False, None, None, None)
    return run
