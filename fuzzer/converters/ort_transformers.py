"""ort-transformers: ONNX Runtime's transformers optimizer, the Python graph fusions of `onnxruntime.transformers`
(LayerNormalization, Gelu, SkipLayerNormalization, attention and more into com.microsoft operators) that
`optimize_model` applies at opt_level 0, with ONNX Runtime's own optimizer left off (ort-optimizer tests that)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import onnx

from fuzzer.converters.culprit import FoundBy, named
from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.ort_optimizer import ORT_TRACKER
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamChoices, UpstreamOptions
from fuzzer.support.quiet import library_output

# The model types a campaign draws: each is an optimizer class with its own fusion order and options. Left out:
# unet, vae and mmdit (Stable Diffusion on CUDA in float16: their NhwcConv fusion writes an operator the CPU
# provider has no kernel for) and phi (its preprocessing reads the dynamo exporter's local functions and fails on
# any other model before fusing).
MODEL_TYPES = ("bert", "gpt2", "t5", "bart", "clip", "conformer", "sam2", "tnlr", "bert_tf", "bert_keras")
# A FusionOptions flag that is no fusion: the shape inference some fusions read. The other `enable_*` flags on for a
# model type are its passes, each of which can run alone (the others off), as a user turns one off.
SHAPE_INFERENCE_FLAG = "enable_shape_inference"


@dataclass(frozen=True)
class OrtTransformersOptions(UpstreamOptions):
    choices = UpstreamChoices(model_type=MODEL_TYPES)
    model_type: str = "bert"
    passes: tuple[str, ...] = ()  # the FusionOptions flags left on (empty: the model type's defaults)

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = set(self.passes) - set(fusion_flags(self.model_type)) if self.passes else set()
        if unknown:
            raise ValueError(f"option passes: {sorted(unknown)} are no fusion flags of model_type "
                             f"{self.model_type!r}; its flags: {', '.join(fusion_flags(self.model_type))}")


class OrtTransformers(OnnxPassConverter[OrtTransformersOptions]):
    name = "ort-transformers"
    display_name = "ONNX Runtime transformers optimizer"
    project = "ONNX Runtime"
    distribution = "onnxruntime"
    tracker = ORT_TRACKER
    libraries = ("onnxruntime", "onnxruntime.transformers.optimizer")
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = OrtTransformersOptions
    onnx_checked = False  # it writes ONNX Runtime's contrib operators, some in ONNX's domain

    def component(self, site: FaultSite) -> Component:
        """The fusion flag that shows the bug alone (the cross-checks run each), else the model type's optimizer."""
        model_type = site.options.get("model_type", OrtTransformersOptions.model_type)
        where = f"transformers optimizer (onnxruntime.transformers, model_type={model_type!r})"
        passes = named(site.culprits, FoundBy.ALONE) or tuple(site.options.get("passes") or ())
        if len(passes) == 1:
            return self.own_component(f"{where}, the fusion `FusionOptions.{passes[0]}` turns on")
        return self.own_component(where)

    def snippet(self, options: OrtTransformersOptions) -> Snippet:
        off = self._off(options)
        imports = ("import os", "import tempfile", "from onnxruntime.transformers.optimizer import optimize_model",
                   *(("from onnxruntime.transformers.fusion_options import FusionOptions",) if off else ()))
        return Snippet(imports, _optimize_lines(options.model_type, off))

    def pass_names(self, options: OrtTransformersOptions) -> tuple[str, ...]:
        """The FusionOptions flags on (the model type's own unless `passes` names some)."""
        return options.passes or fusion_flags(options.model_type)

    def avoid_settings(self, options: OrtTransformersOptions, hints: Hints) -> tuple[Setting, ...]:
        """The fusion flags that show the bug alone (the cross-checks') turned off; the generic bert optimizer
        instead of a model type's own (another fusion order and set)."""
        data, on = options.to_json(), self.pass_names(options)
        culprits = [p for p in named(hints.culprits, FoundBy.ALONE) if p in on]
        kept = tuple(p for p in on if p not in culprits)
        without = (Setting(f"{self.display_name} with " + ", ".join(f"FusionOptions.{c}" for c in culprits) +
                           " off", self.name, {**data, "passes": list(kept)},
                           "; ".join((f"fusion_options = FusionOptions({options.model_type!r})",
                                      *(f"fusion_options.{flag} = False" for flag in (*self._off(options), *culprits)),
                                      "optimize_model(..., optimization_options=fusion_options)"))),
                   ) if culprits and kept else ()
        bert = (Setting(f"model_type 'bert' instead of {options.model_type!r}", self.name,
                        {**data, "model_type": "bert", "passes": []},
                        "optimize_model(model, model_type='bert', opt_level=0).save_model_to_file(path)"),
                ) if options.model_type != "bert" else ()
        return (*without, *bert)

    def _off(self, options: OrtTransformersOptions) -> tuple[str, ...]:
        """The model type's fusion flags `options` turn off (none where `passes` is empty: its defaults)."""
        if not options.passes:
            return ()
        return tuple(f for f in fusion_flags(options.model_type) if f not in options.passes)

    def rewrite_names(self) -> tuple[str, ...]:
        """Every fusion the installed `onnxruntime.transformers` defines: each subclass of its Fusion base that an
        optimizer names or that none extends (a base such as FusionGptAttentionPastBase fuses nothing itself)."""
        fusion = _fusion_base().Fusion
        folder = sys.modules["onnxruntime.transformers"].__path__
        for info in pkgutil.iter_modules(folder):
            if info.name.startswith("fusion_"):
                importlib.import_module(info.name)  # the package imports its modules by their bare names
        every = tuple(_subclasses(fusion))
        named = _named_fusions(_library_model_types())
        return tuple(sorted({c.__name__ for c in every if c.__name__ in named or not c.__subclasses__()}))

    def rewrites_out_of_reach(self, device: str) -> Mapping[str, str]:
        """The fusions only the optimizers of model types a campaign does not draw name (MODEL_TYPES says why)."""
        drawn = _named_fusions(MODEL_TYPES)
        return {name: "only the optimizers of model types a campaign does not draw (unet, vae, mmdit, phi) use it"
                for name in self.rewrite_names() if name not in drawn}

    def rewrites_beyond_float(self) -> frozenset[str]:
        """The QOrdered fusions: they rewrite quantized (int8) attention, MatMul, Gelu and LayerNormalization."""
        return frozenset(name for name in self.rewrite_names() if name.startswith("FusionQOrdered"))

    def fired(self, model: onnx.ModelProto, options: OrtTransformersOptions) -> tuple[str, ...]:
        """The fusions that added or removed nodes when the optimizer ran on `model`."""
        return self.transform_watched(model, options)[1]

    def transform_watched(self, model: onnx.ModelProto, options: OrtTransformersOptions) -> tuple[
            onnx.ModelProto, tuple[str, ...]]:
        """The optimizer's own call with each Fusion's `apply` watched: its model and the fusions that added or
        removed nodes, from the one run."""
        fired: list[str] = []
        with _watching_fusions(fired):
            made = self.transform(model, options)
        return made, tuple(dict.fromkeys(fired))

    def transform(self, model: onnx.ModelProto, options: OrtTransformersOptions) -> onnx.ModelProto:
        from onnxruntime.transformers.optimizer import optimize_model

        own = onnx.ModelProto()
        own.CopyFrom(model)  # the optimizer rewrites the proto it is given in place
        flags = _fusion_options(options.model_type)
        for flag in self._off(options):
            setattr(flags, flag, False)
        with library_output(), tempfile.TemporaryDirectory() as folder:  # its progress bars and fusion log
            # Saved as its users save it: the save sorts the nodes and imports com.microsoft, which `.model` lacks.
            path = os.path.join(folder, "optimized.onnx")
            optimize_model(own, model_type=options.model_type, opt_level=0,
                           optimization_options=flags).save_model_to_file(path)
            return onnx.load(path)


def fusion_flags(model_type: str) -> tuple[str, ...]:
    """The FusionOptions flags a model type turns on that each turn on a fusion (its passes)."""
    defaults = vars(_fusion_options(model_type))
    return tuple(sorted(k for k, v in defaults.items() if k.startswith("enable_") and v is True
                        and k != SHAPE_INFERENCE_FLAG))


def _fusion_options(model_type: str) -> Any:
    _fusion_base()  # puts the package's folder on sys.path
    return importlib.import_module("fusion_options").FusionOptions(model_type)


def _optimize_lines(model_type: str, off: tuple[str, ...]) -> tuple[str, ...]:
    """The optimizer's call as a user writes it, with the fusion flags `off` turned off."""
    path = "path = os.path.join(tempfile.mkdtemp(), 'optimized.onnx')"
    if not off:
        return (path, f"optimize_model(model, model_type={model_type!r}, opt_level=0).save_model_to_file(path)",
                "model = onnx.load(path)")
    flags = ", ".join(repr(flag) for flag in off)
    return (path, f"fusion_options = FusionOptions({model_type!r})",
            f"for flag in [{flags}]: setattr(fusion_options, flag, False)",
            f"optimize_model(model, model_type={model_type!r}, opt_level=0, "
            "optimization_options=fusion_options).save_model_to_file(path)", "model = onnx.load(path)")


def _fusion_base() -> ModuleType:
    """The optimizer's `fusion_base` module: the package puts its folder on sys.path and imports its modules by
    bare name, so its Fusion class is `fusion_base.Fusion`, not `onnxruntime.transformers.fusion_base.Fusion`."""
    import onnxruntime.transformers.optimizer  # noqa: F401  (puts the folder on sys.path)

    return importlib.import_module("fusion_base")


def _library_model_types() -> tuple[str, ...]:
    from onnxruntime.transformers.optimizer import MODEL_TYPES as LIBRARY_TYPES

    return tuple(LIBRARY_TYPES)


def _named_fusions(model_types: tuple[str, ...]) -> frozenset[str]:
    """The fusion classes named in the modules of the optimizer classes of `model_types` and of their bases, and in
    the modules of those fusions (an attention fusion builds its own helpers)."""
    from onnxruntime.transformers.optimizer import MODEL_TYPES as LIBRARY_TYPES

    fusion = _fusion_base().Fusion
    modules = {sys.modules[base.__module__] for t in model_types for base in LIBRARY_TYPES[t][0].__mro__}
    found: set[type] = set()
    while modules:
        module = modules.pop()
        new = {v for v in vars(module).values() if isinstance(v, type) and issubclass(v, fusion)} - found
        found |= new
        modules |= {sys.modules[c.__module__] for c in new} - {module}
    return frozenset(c.__name__ for c in found)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@contextmanager
def _watching_fusions(fired: list[str]) -> Iterator[None]:
    """Record into `fired` each fusion whose `apply` leaves nodes to add or remove, for the block only (a worker
    runs one test at a time, so no other call sees the wrapper)."""
    fusion = _fusion_base().Fusion
    original = fusion.apply

    def recording(self: Any) -> None:
        original(self)
        if self.nodes_to_add or self.nodes_to_remove:
            fired.append(type(self).__name__)

    fusion.apply = recording
    try:
        yield
    finally:
        fusion.apply = original
