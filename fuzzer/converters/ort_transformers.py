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

import onnx

from fuzzer.converters.describe import Component, FaultSite, Snippet
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.setting import Hints, Setting
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamChoices, UpstreamOptions
from fuzzer.support.quiet import library_output

# The model types a campaign draws: each is an optimizer class with its own fusion order and options. Left out:
# unet, vae and mmdit (Stable Diffusion on CUDA in float16: their NhwcConv fusion writes an operator the CPU
# provider has no kernel for) and phi (its preprocessing reads the dynamo exporter's local functions and fails on
# any other model before fusing).
MODEL_TYPES = ("bert", "gpt2", "t5", "bart", "clip", "conformer", "sam2", "tnlr", "bert_tf", "bert_keras")


@dataclass(frozen=True)
class OrtTransformersOptions(UpstreamOptions):
    choices = UpstreamChoices(model_type=MODEL_TYPES)
    model_type: str = "bert"


class OrtTransformers(OnnxPassConverter):
    name = "ort-transformers"
    display_name = "ONNX Runtime transformers optimizer"
    project = "ONNX Runtime"
    distribution = "onnxruntime"
    tracker = "https://github.com/microsoft/onnxruntime/issues"
    libraries = ("onnxruntime", "onnxruntime.transformers.optimizer")
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = OrtTransformersOptions
    onnx_checked = False  # it writes ONNX Runtime's contrib operators, some in ONNX's domain

    def component(self, site: FaultSite) -> Component:
        """The transformers optimizer of the case's model type (onnxruntime/python/tools/transformers)."""
        model_type = site.options.get("model_type", OrtTransformersOptions.model_type)
        return self.own_component(f"transformers optimizer (onnxruntime.transformers, model_type={model_type!r})")

    def snippet(self, options: ConverterOptions) -> Snippet:
        opts: OrtTransformersOptions = options  # type: ignore[assignment]
        imports = ("import os", "import tempfile", "from onnxruntime.transformers.optimizer import optimize_model")
        return Snippet(imports, (
            "path = os.path.join(tempfile.mkdtemp(), 'optimized.onnx')",
            f"optimize_model(model, model_type={opts.model_type!r}, opt_level=0).save_model_to_file(path)",
            "model = onnx.load(path)"))

    def avoid_settings(self, options: ConverterOptions, hints: Hints) -> tuple[Setting, ...]:
        """The generic bert optimizer instead of a model type's own (another fusion order and set)."""
        opts: OrtTransformersOptions = options  # type: ignore[assignment]
        if opts.model_type == "bert":
            return ()
        return (Setting(f"model_type 'bert' instead of {opts.model_type!r}", self.name,
                        {**opts.to_json(), "model_type": "bert"},
                        "optimize_model(model, model_type='bert', opt_level=0).save_model_to_file(path)"),)

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

    def fired(self, model: onnx.ModelProto, options: ConverterOptions) -> tuple[str, ...]:
        """The fusions that added or removed nodes when the optimizer ran on `model` (each Fusion's `apply` is
        watched for one run)."""
        fired: list[str] = []
        with _watching_fusions(fired):
            self.transform(model, options)  # type: ignore[arg-type]
        return tuple(dict.fromkeys(fired))

    def transform(self, model: onnx.ModelProto, options: OrtTransformersOptions) -> onnx.ModelProto:
        from onnxruntime.transformers.optimizer import optimize_model

        own = onnx.ModelProto()
        own.CopyFrom(model)  # the optimizer rewrites the proto it is given in place
        with library_output(), tempfile.TemporaryDirectory() as folder:  # its progress bars and fusion log
            # Saved as its users save it: the save sorts the nodes and imports com.microsoft, which `.model` lacks.
            path = os.path.join(folder, "optimized.onnx")
            optimize_model(own, model_type=options.model_type, opt_level=0).save_model_to_file(path)
            return onnx.load(path)


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

    def recording(self: object) -> None:
        original(self)
        if self.nodes_to_add or self.nodes_to_remove:  # type: ignore[attr-defined]
            fired.append(type(self).__name__)

    fusion.apply = recording
    try:
        yield
    finally:
        fusion.apply = original
