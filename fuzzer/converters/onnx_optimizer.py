"""onnxoptimizer: the ONNX project's pass library (fusions and eliminations)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from fuzzer.converters.culprit import FoundBy, named
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.rewrite_matches import ClassTracker, Fired
from fuzzer.converters.rewrite_view import RewriteView
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from oracles.signature import first_lines


@dataclass(frozen=True)
class OnnxOptimizerOptions(UpstreamOptions):
    passes: tuple[str, ...] = ()  # empty: onnxoptimizer's fuse-and-elimination set
    fixed_point: bool = False


class OnnxOptimizer(OnnxPassConverter[OnnxOptimizerOptions]):
    name = "onnxoptimizer"
    rewrite_tool = "onnxoptimizer"
    display_name = "onnxoptimizer"
    project = "onnxoptimizer"
    distribution = "onnxoptimizer"
    tracker = "https://github.com/onnx/optimizer/issues"

    def component(self, site: FaultSite) -> Component:
        """The pass that shows the bug alone (the cross-checks run each), or the case's one pass."""
        passes = named(site.culprits, FoundBy.ALONE) or tuple(site.options.get("passes") or ())
        if len(passes) == 1:
            return self.own_component(f"pass `{passes[0]}`")
        if passes:
            return self.own_component("passes " + ", ".join(f"`{p}`" for p in passes) + " (each shows it alone)")
        return self.own_component("its pass set (no single pass shows it alone)")

    def snippet(self, options: OnnxOptimizerOptions) -> Snippet:
        passes = repr(list(options.passes)) if options.passes else "onnxoptimizer.get_fuse_and_elimination_passes()"
        return Snippet(("import onnxoptimizer",), (
            f"model = onnxoptimizer.optimize(model, {passes}, fixed_point={options.fixed_point})",))
    libraries = ("onnxoptimizer", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime", "onnxoptimizer")
    options_type = OnnxOptimizerOptions

    def avoid_settings(self, options: OnnxOptimizerOptions, hints: Hints) -> tuple[Setting, ...]:
        """The case's pass set without the passes that show the bug alone (the cross-checks'); fixed_point off."""
        alone = named(hints.culprits, FoundBy.ALONE)
        data, culprits = options.to_json(), [p for p in alone if p in self.pass_names(options)]
        kept = [p for p in self.pass_names(options) if p not in culprits]
        listed = repr(list(options.passes)) if options.passes else "onnxoptimizer.get_fuse_and_elimination_passes()"
        without = (Setting(f"{self.display_name or self.name}'s passes without " + ", ".join(culprits), self.name,
                           {**data, "passes": kept}, f"model = onnxoptimizer.optimize(model, [p for p in {listed} "
                           f"if p not in {culprits!r}], fixed_point={options.fixed_point})"),
                   ) if culprits and kept else ()
        fixed = (Setting("fixed_point off", self.name, {**data, "fixed_point": False},
                         f"model = onnxoptimizer.optimize(model, {listed}, fixed_point=False)"),
                 ) if options.fixed_point else ()
        return (*without, *fixed)

    def rewrite_view(self, upstream: bytes, site: FaultSite) -> RewriteView | None:
        """The received model, and what the one pass that shows the bug alone makes of it."""
        alone = named(site.culprits, FoundBy.ALONE)
        if len(alone) != 1:
            return None
        import onnxoptimizer

        name = alone[0]
        before = onnxoptimizer.optimize(onnx.load_from_string(upstream), []).SerializeToString()  # its round trip
        try:
            after: bytes | None = onnxoptimizer.optimize(onnx.load_from_string(before), [name]).SerializeToString()
            error = ""
        except Exception as exc:  # the pass's own failure: there is no model after it
            after, error = None, first_lines(str(exc))
        return RewriteView(f"pass `{name}`", "the model onnxoptimizer received", before, after, error)

    def pass_names(self, options: OnnxOptimizerOptions) -> tuple[str, ...]:
        """The case's passes, or onnxoptimizer's fuse-and-elimination set when it names none."""
        return tuple(options.passes) or fuse_and_elimination_passes()

    def rewrite_names(self) -> tuple[str, ...]:
        """onnxoptimizer's fuse-and-elimination set, what a campaign runs by default."""
        return fuse_and_elimination_passes()

    def fired(self, model: onnx.ModelProto, options: OnnxOptimizerOptions) -> tuple[str, ...]:
        """The passes that change the model, each run once in order on the previous one's output (the one call
        `transform` makes runs them so, on an in-memory graph; a fixed-point run may fire more)."""
        return self.replay(model, options).names

    def fired_rewrites(self, received: onnx.ModelProto, made: onnx.ModelProto, options: OnnxOptimizerOptions,
                       watched: tuple[str, ...] | None) -> Fired:
        """`fired`'s passes, each with the classes of the nodes it changed."""
        return self.replay(received, options)

    def replay(self, model: onnx.ModelProto, options: OnnxOptimizerOptions) -> Fired:
        """The passes run one at a time as `fired` runs them, with the classes of what each changed."""
        import onnxoptimizer

        # The library's round trip alone changes the bytes (its "nop" pass would count as firing): start from it.
        start = onnxoptimizer.optimize(model, [])
        fired, current, tracker = [], start.SerializeToString(), ClassTracker(start)
        for name in self.pass_names(options):
            made = onnxoptimizer.optimize(onnx.load_from_string(current), [name])
            after = made.SerializeToString()
            if after != current:
                fired.append(name)
                tracker.step(name, made)
            current = after
        return tracker.fired(tuple(fired))

    def transform(self, model: onnx.ModelProto, options: OnnxOptimizerOptions) -> onnx.ModelProto:
        import onnxoptimizer

        passes = list(options.passes) or onnxoptimizer.get_fuse_and_elimination_passes()
        return onnxoptimizer.optimize(model, passes, fixed_point=options.fixed_point)


def fuse_and_elimination_passes() -> tuple[str, ...]:
    """onnxoptimizer's default pass set by name (what empty `passes` runs); its library must import."""
    import onnxoptimizer

    return tuple(onnxoptimizer.get_fuse_and_elimination_passes())
