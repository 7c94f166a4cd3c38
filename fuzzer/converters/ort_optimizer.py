"""ort-optimizer: ONNX Runtime's graph optimizations (basic, extended, all) judged against the disabled run.

When only the optimized run diverges the stage is graph optimization; `bisect` then finds the lowest level
that diverges and bisects ORT's transformer names (disabled_optimizers) to name the one responsible (a Culprit).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import onnx
from onnxruntime import InferenceSession

from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import Shows
from fuzzer.converters.conversion import Source, Steps, TargetRun, UpstreamError
from fuzzer.converters.culprit import Culprit, FoundBy, bisected
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.ort_attribution import transformer_classes
from fuzzer.converters.ort_levels import LEVELS, OPTIMIZING_LEVELS
from fuzzer.converters.rewrite_matches import Fired
from fuzzer.converters.rewrite_view import RewriteView
from fuzzer.converters.role import Role
from fuzzer.converters.runtime import (
    free_dimension_sizes,
    graph_transformers,
    logged_session,
    make_session,
    optimized_model,
    run_model,
    run_session,
    symbolic_inputs,
)
from fuzzer.converters.setting import Hints, Setting, session_level_code
from fuzzer.converters.upstream import UpstreamChoices, UpstreamOptions, export_upstream
from oracles.signature import first_lines
from oracles.verdict import Stage

# Transformer and rewrite-rule names from onnxruntime/core/optimizer/graph_transformer_utils.cc (ORT has no
# API that lists them; unknown names are ignored by disabled_optimizers, so extra names are harmless).
ORT_OPTIMIZERS: tuple[str, ...] = (
    "ConstantFolding", "CommonSubexpressionElimination", "ConstantSharing", "MatMulAddFusion", "ReshapeFusion",
    "TransposeOptimizer", "FreeDimensionOverrideTransformer", "QDQPropagationTransformer", "DoubleQDQPairsRemover",
    "EnsureUniqueDQForNodeUnit", "WeightBiasQuantization", "QDQFinalCleanupTransformer", "CastChainElimination",
    "Level1_RuleBasedTransformer", "EliminateIdentity", "EliminateSlice", "UnsqueezeElimination",
    "EliminateDropout", "ExpandElimination", "CastElimination", "PreShapeNodeElimination", "NoopElimination",
    "DivMulFusion", "FuseReluClip", "GemmSumFusion", "GemmTransposeFusion", "NotWhereFusion", "ConvAddFusion",
    "ConvMulFusion", "ConvBNFusion", "ClipQuantFusion", "ReluQuantFusion", "LabelEncoderFusion",
    "Level2_RuleBasedTransformer", "ConvActivationFusion", "ConvAddActivationFusion", "GemmActivationFusion",
    "MatMulIntegerToFloatFusion", "DynamicQuantizeMatMulFusion", "GeluFusion", "LayerNormFusion",
    "SimplifiedLayerNormFusion", "AttentionFusion", "EmbedLayerNormFusion", "GatherSliceToSplitFusion",
    "GatherToSliceFusion", "GatherToSplitFusion", "MatmulTransposeFusion", "BiasGeluFusion",
    "SkipLayerNormFusion", "FastGeluFusion", "QuickGeluFusion", "BiasSoftmaxFusion", "BiasDropoutFusion",
    "MatMulScaleFusion", "MatMulActivationFusion", "IsInfReduceSumFusion", "PadFusion", "ConcatSliceElimination",
    "NchwcTransformer", "NhwcTransformer", "QDQS8ToU8Transformer", "QDQSelectorActionTransformer",
    "GroupQueryAttentionFusion", "MatMulNBitsFusion", "ShapeInputMerge", "MemcpyTransformer",
)


# Transformers the installed ONNX Runtime lists that cannot fire in a CPU-only session, with why (the execution
# providers each is registered for, from onnxruntime/core/optimizer/graph_transformer_utils.cc and its tests, or
# the kernel it fuses into missing from the CPU build).
OUT_OF_REACH_ON_CPU: Mapping[str, str] = MappingProxyType({
    "BiasDropoutFusion": "registered for the CUDA and ROCm execution providers only",
    "BiasSoftmaxFusion": "the CPU build has no BiasSoftmax kernel: no Add then Softmax fused on the CPU in any shape, "
                         "axis, opset or level tried (generators/ops/fusions_more.py)",
    "GroupQueryAttentionFusion": "registered for the CUDA execution provider only",
    "GroupQueryAttentionPreNormFusion": "registered for the WebGPU and CUDA execution providers only",
    "MatMulActivationFusion": "registered for the DirectML execution provider only",
    "SwiGluFusion": "registered for the CUDA execution provider only (Split, QuickGelu, Mul does not fuse on CPU)",
    "MemcpyTransformer": "inserts copies between execution providers: a CPU-only session has only one",
})
# Transformers that rewrite only quantized (QDQ, integer-kernel) graphs, or int8/uint8 ones: NhwcTransformer takes
# QLinear kernels on x86, and the CPU pass of TransposeOptimizer pushes Transposes into uint8/int8 MaxPool and Resize.
BEYOND_FLOAT = re.compile(r"QDQ|Quant|Dq|DQ|NBits|Integer|^NhwcTransformer$|^TransposeOptimizer_CPUExecutionProvider$")


@dataclass(frozen=True)
class OrtOptimizerOptions(UpstreamOptions):
    choices = UpstreamChoices(level=LEVELS)
    space = {"level": OPTIMIZING_LEVELS}  # disabled is the reference every level is compared with
    level: str = "all"
    # Transformers the session leaves out (InferenceSession's disabled_optimizers): a workaround's setting, never
    # drawn by a campaign.
    disabled_optimizers: tuple[str, ...] = ()
    # Each named input dimension fixed to its size in the test's inputs (add_free_dimension_override_by_name), as a
    # deployment with known shapes does: FreeDimensionOverrideTransformer then makes the model static.
    free_dims: bool = False


ORT_TRACKER = "https://github.com/microsoft/onnxruntime/issues"


def _session_keeping(model: bytes, options: OrtOptimizerOptions, source: Source, path: str) -> tuple[
        InferenceSession, tuple[str, ...]]:
    """logged_session's session and transformers, the optimized model written to `path`; where writing it fails the
    session is made again as a user makes it (whose own failure is then the bug, and no classes are read)."""
    dims = _free_dims(model, source, options)
    try:
        return logged_session(model, options.level, source.device, options.disabled_optimizers, dims, path)
    except Exception:
        return logged_session(model, options.level, source.device, options.disabled_optimizers, dims)


def _classes(names: tuple[str, ...], model: bytes, path: str, options: OrtOptimizerOptions, source: Source
             ) -> Fired:
    """Each transformer that logged a change with the classes of what it matched (ort_attribution.py), from the
    optimized model at `path`; the names alone where that model cannot be read. The models optimized without one
    transformer are written beside it (a temporary folder each cost 3 ms on a loaded machine)."""
    if not names or not os.path.isfile(path):
        return Fired(names, {name: () for name in names})
    dims = _free_dims(model, source, options)

    def without(name: str) -> onnx.ModelProto | None:
        kept = os.path.join(os.path.dirname(path), f"without-{names.index(name)}.onnx")
        logged_session(model, options.level, source.device, (*options.disabled_optimizers, name), dims, kept)
        return onnx.load(kept) if os.path.isfile(kept) else None

    try:
        return transformer_classes(names, onnx.load_from_string(model), onnx.load(path), without)
    except Exception:  # an optimized model onnx cannot read, a session that fails without one transformer
        return Fired(names, {name: () for name in names})


class OrtOptimizer(Converter[OrtOptimizerOptions]):
    name = "ort-optimizer"
    role = Role.ONNX_TOOL
    framework = "onnx"
    runtime = "onnxruntime"
    level_option = "level"
    rewrite_tool = "ort"
    # Its call is the session's level: the model goes through unchanged, run at the level and with optimizations off.
    repro_conversion = "optimize_in_session"
    repro_upstream_conversion = "optimize_upstream_in_session"
    display_name = "ONNX Runtime graph optimizations"
    project = "ONNX Runtime"
    distribution = "onnxruntime"
    tracker = ORT_TRACKER

    def component(self, site: FaultSite) -> Component:
        """The graph transformer ONNX Runtime's bisection named (disabling it alone removes the bug), else the
        optimizer at the lowest level that shows it."""
        found = bisected(site.culprits)
        if found is not None and found.rewrite:
            return self.own_component(f"graph transformer `{found.rewrite}`")
        level = (found.level if found is not None else "") or site.options.get("level", "all")
        return self.own_component(f"graph optimizations at level `{level}` (no single transformer isolated)")

    def snippet(self, options: OrtOptimizerOptions) -> Snippet:
        return Snippet((), (), level=options.level, free_dims=options.free_dims)
    libraries = ("onnx", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = OrtOptimizerOptions
    divergence_stage = Stage.GRAPH_OPTIMIZATION

    def convert_impl(self, source: Source, options: OrtOptimizerOptions) -> TargetRun:
        if options.level not in OPTIMIZING_LEVELS:
            raise ValueError(f"level must be one of {OPTIMIZING_LEVELS}, not {options.level!r}")
        steps = Steps()
        up = export_upstream(source, options.upstream, options.opset, steps)
        model, baseline, baseline_dtypes = up.data, up.outputs, up.output_dtypes
        if options.free_dims:  # the model made dynamic, run unoptimized as the baseline, then fixed by name
            model = symbolic_inputs(up.data)
            baseline, baseline_dtypes = run_model(model, source, steps)
        with steps.at(Stage.GRAPH_OPTIMIZATION, "runtime_load"), tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "optimized.onnx")
            session, names = _session_keeping(model, options, source, path)
            start = time.perf_counter()
            fired = _classes(names, model, path, options, source)
            steps.timings["rewrites"] = time.perf_counter() - start
        with steps.at(Stage.RUNTIME_EXECUTION, "runtime"):
            outputs, dtypes = run_session(session, source.input_names, source.inputs)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=model, baseline=baseline,
                         baseline_model=model, baseline_dtypes=baseline_dtypes, rewrites=fired.names,
                         rewrite_classes=fired.classes)

    def avoid_settings(self, options: OrtOptimizerOptions, hints: Hints) -> tuple[Setting, ...]:
        """The transformer ONNX Runtime's bisection named, disabled alone; the input dimensions left free where they
        were fixed; then each lower level, the nearest first."""
        found = bisected(hints.culprits)
        data, named = options.to_json(), found.rewrite if found is not None else ""
        alone = (Setting(f"ONNX Runtime's {named} disabled", self.name, {**data, "disabled_optimizers": [named]},
                         f"onnxruntime.InferenceSession(model, sess_options, disabled_optimizers=[{named!r}])"),
                 ) if named and named not in options.disabled_optimizers else ()
        lower = OPTIMIZING_LEVELS[: OPTIMIZING_LEVELS.index(options.level)][::-1]
        fixed = (Setting("the input dimensions left free (no add_free_dimension_override_by_name)", self.name,
                         {**data, "free_dims": False}, "# drop the sess_options.add_free_dimension_override_by_name "
                         "calls"),) if options.free_dims else ()
        return (*alone, *fixed, *(Setting(f"ONNX Runtime's optimizations at level {lv} instead of {options.level}",
                                          self.name, {**data, "level": lv}, session_level_code(lv)) for lv in lower))

    def rewrite_names(self) -> tuple[str, ...]:
        """The graph transformers the installed ONNX Runtime has (its rule-based transformers as one each)."""
        return graph_transformers()

    def rewrite_view(self, upstream: bytes, site: FaultSite) -> RewriteView | None:
        """At the lowest level that shows the bug: the model optimized with the bisected transformer disabled (what
        it would have received, near enough), and with it enabled."""
        found = bisected(site.culprits)
        if found is None or not found.rewrite or site.options.get("free_dims"):  # fixed dims need the inputs' sizes
            return None
        name, level = found.rewrite, found.level or site.options.get("level", "all")
        try:
            before = optimized_model(upstream, level, (name,))
        except Exception:  # the bug does not go with the transformer here: nothing to show
            return None
        try:
            after: bytes | None = optimized_model(upstream, level, ())
            error = ""
        except Exception as exc:  # the transformer's own failure: there is no model after it
            after, error = None, first_lines(str(exc))
        before_is = f"the model optimized at level {level} with it disabled (what it works on, near enough)"
        return RewriteView(f"graph transformer `{name}`", before_is, before, after, error)

    def rewrites_out_of_reach(self, device: str) -> Mapping[str, str]:
        """Transformers registered for other execution providers only (on the CPU)."""
        return OUT_OF_REACH_ON_CPU if device == "cpu" else {}

    def rewrites_beyond_float(self) -> frozenset[str]:
        return frozenset(name for name in self.rewrite_names() if BEYOND_FLOAT.search(name))

    def bisect(self, source: Source, options: OrtOptimizerOptions, run: TargetRun, shows: Shows) -> Culprit | None:
        """The lowest level whose run `shows` the bug (a crash counts) and, when bisection isolates one, the graph
        transformer that disabling alone removes it."""
        assert run.model is not None
        levels = OPTIMIZING_LEVELS[: OPTIMIZING_LEVELS.index(options.level) + 1]
        free = _free_dims(run.model, source, options)
        level = next((lv for lv in levels if _diverges_at(run.model, source, lv, (), shows, free)), None)
        if level is None:
            return None
        return Culprit(self.name, FoundBy.BISECTION, _bisect(run.model, source, level, shows, free) or "", level)

    def bisect_crash(self, source: Source, options: OrtOptimizerOptions) -> Culprit | None:
        """The bisection of a crash at graph optimization, from the upstream model (outputs count as passing)."""
        if not self.availability()[0]:
            return None
        try:
            up = export_upstream(source, options.upstream, options.opset, Steps(), run=False)
        except UpstreamError:
            return None
        return self.bisect(source, options, TargetRun((), (), {}, model=up.data), lambda _outputs: False)


def _free_dims(model: bytes, source: Source, options: OrtOptimizerOptions) -> dict[str, int]:
    return free_dimension_sizes(model, source.input_names, source.inputs) if options.free_dims else {}


def _diverges_at(model: bytes, source: Source, level: str, disabled: Sequence[str], diverges: Shows,
                 free: Mapping[str, int]) -> bool:
    """Does the run at `level` with `disabled` optimizers diverge? A crash counts as diverging."""
    try:
        session = make_session(model, level, disabled, source.device, free)
        outputs, _ = run_session(session, source.input_names, source.inputs)
    except Exception:  # the optimizer crashed with this set: still guilty-looking, keep searching
        return True
    return diverges(outputs)


def _bisect(model: bytes, source: Source, level: str, diverges: Shows, free: Mapping[str, int]) -> str | None:
    """Assume one guilty optimizer: halve the candidates until disabling one alone stops the divergence."""
    candidates = list(ORT_OPTIMIZERS)
    if _diverges_at(model, source, level, candidates, diverges, free):
        return None  # not one of the names we know (or not an optimizer at all)
    while len(candidates) > 1:
        half = candidates[: len(candidates) // 2]
        candidates = half if not _diverges_at(model, source, level, half, diverges, free) else candidates[len(half):]
    return candidates[0]

