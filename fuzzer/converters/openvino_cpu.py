"""OpenVINO's CPU plugin, shared by both OpenVINO converters (its PyTorch and its ONNX frontend): the settings a
deployment compiles with (the inference precision hint, the performance hint), the compile and the inference, the
components a bug is filed under, and the evidence that tells a frontend's translation from the plugin.

The evidence for a divergence (`divergence_labels`) runs the model the frontend made through `ov.Model.evaluate`,
OpenVINO's own reference implementation of each operation, which no plugin transformation touches: a model that
computes the same wrong outputs there was translated wrongly; one that computes them right is run wrongly by the plugin.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fuzzer.converters.conversion import Steps
from fuzzer.converters.describe import Component, FaultSite
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.setting import Setting
from oracles.verdict import Stage

PROJECT = "OpenVINO"
TRACKER = "https://github.com/openvinotoolkit/openvino/issues"
DISTRIBUTION = "openvino"
PLUGIN_KEY = "openvino-cpu-plugin"  # the plugin's root causes, whichever frontend's model showed them
PRECISIONS = ("f32", "bf16")  # INFERENCE_PRECISION_HINT values a campaign can draw
PERFORMANCE = ("LATENCY", "THROUGHPUT")  # PERFORMANCE_HINT values
# The labels `divergence_labels` gives a divergence: what OpenVINO's reference evaluation of the frontend's model
# made of it.
REFERENCE_WRONG = "ov-reference:wrong"  # Model.evaluate diverges too: the frontend's translation
REFERENCE_RIGHT = "ov-reference:right"  # Model.evaluate is right: the CPU plugin
# The frontends' clean refusals: an operation they have no translation for (both say it so), a mode or an input of
# one they do not take (the ONNX frontend's Pad: "Unsupported padding mode: [wrap]"; the PyTorch frontend's pooling:
# "Translation for aten::avg_pool2d do not support divisor_override input"); and the CPU plugin's: an operation
# whose rank is not known when it compiles, or a value beyond the range of the type it computes in (BEYOND_RANGE).
UNSUPPORTED_MESSAGES = (r"No conversion rule found for operations", r"Unsupported padding mode",
                        r"\[PyTorch Frontend\] Translation for [\w:]+ do(?:es)? not support",
                        r"CPU plug-in doesn't support \w+ operation with dynamic rank", r"beyond its range: not judged")
VALIDATING = "While validating node"  # OpenVINO's shape inference rejecting a node of the model
# The wide types the CPU plugin converts to narrower ones (it has no kernels for them), and the message of a test
# whose tensors hold a value beyond the narrower type's range: its values cannot be judged (a limit, counted).
NARROWED = {torch.float64: torch.float32, torch.int64: torch.int32}
BEYOND_RANGE = "the CPU plugin computes {} in {}, and the test holds a value beyond its range: not judged"


def cpu_precisions() -> tuple[str, ...]:
    """The inference precisions this machine's CPU plugin computes in: f32, and bf16 where the CPU has it."""
    return _capabilities()


@functools.cache
def _capabilities() -> tuple[str, ...]:
    import openvino as ov

    capabilities = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    return ("f32", "bf16") if "BF16" in capabilities else ("f32",)


@dataclass(frozen=True)
class CpuSettings(ConverterOptions):
    """The CPU plugin's compile settings: the inference precision hint (bf16 drawn only where the CPU computes in
    it: elsewhere the plugin ignores it) and the performance hint."""

    choices = {"precision": PRECISIONS, "performance": PERFORMANCE}
    precision: str = "f32"
    performance: str = "LATENCY"

    @classmethod
    def candidates(cls, name: str, drawn: Mapping[str, Any]) -> tuple[Any, ...]:
        if name == "precision":
            return cpu_precisions()
        return super().candidates(name, drawn)


# The CPU plugin's integer inference precision is i32 (its documentation lists no other; an int64 model's values
# beyond int32 come back clamped or wrapped, as its maintainers answer in openvinotoolkit/openvino#24072).
INTEGERS = {"int64": "int32"}


def computed_in(precision: str) -> dict[str, str]:
    """The dtypes the CPU plugin computes in a narrower one: int64 in int32, and float64 in float32 always (it has no
    float64 kernels and converts such a model, as its documentation says); under a bf16 hint where the CPU computes
    in bf16 (elsewhere the plugin ignores the hint) every float type in bfloat16: float64 narrowed to float32, then
    that, and float16, which it computes as float32, alike."""
    if precision == "bf16" and "bf16" in cpu_precisions():
        return {"float64": "bfloat16", "float32": "bfloat16", "float16": "bfloat16", **INTEGERS}
    return {"float64": "float32", **INTEGERS}


def plugin_config(precision: str, performance: str) -> dict[str, str]:
    """compile_model's config, as a user writes it."""
    return {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": performance}


def compile_line(model: str, precision: str, performance: str) -> str:
    """The user's compile of `model` on the CPU plugin under the hints."""
    return f"compiled = ov.Core().compile_model({model}, 'CPU', {plugin_config(precision, performance)!r})"


def compile_and_run(model: Any, feeds: Sequence[np.ndarray | torch.Tensor], precision: str, performance: str,
                    steps: Steps) -> tuple[tuple[np.ndarray, ...], tuple[str, ...]]:
    """`model` (an ov.Model) compiled on the CPU plugin under the hints (its failures at runtime load) and run on
    `feeds`, in the model's input order (at runtime execution): its outputs as the oracle takes them."""
    import openvino as ov

    compiled = plugin_step(steps, Stage.RUNTIME_LOAD, "compile", lambda: ov.Core().compile_model(
        model, "CPU", plugin_config(precision, performance)))
    request = compiled.create_infer_request()
    plugin_step(steps, Stage.RUNTIME_EXECUTION, "infer", lambda: request.infer([ov_tensor(x) for x in feeds]))
    tensors = [request.get_output_tensor(i) for i in range(len(compiled.outputs))]
    pairs = [oracle_array(t) for t in tensors]
    return tuple(a for a, _ in pairs), tuple(d for _, d in pairs)


class BeyondRange(ValueError):
    """The test's tensors hold a value the CPU plugin's narrower arithmetic cannot represent."""


def check_range(tensors: Sequence[torch.Tensor], steps: Steps) -> None:
    """A BeyondRange failure (at runtime execution) where a float64 or int64 input or weight is beyond the range of
    the type the plugin computes it in: its float32 infinity or wrapped int32 is by design, not a defect."""
    for x in tensors:
        narrower = NARROWED.get(x.dtype)
        if narrower is None or x.numel() == 0:
            continue
        info = torch.finfo(narrower) if narrower.is_floating_point else torch.iinfo(narrower)
        finite = x[torch.isfinite(x)] if x.is_floating_point() else x
        if finite.numel() and bool(((finite > info.max) | (finite < info.min)).any()):
            with steps.at(Stage.RUNTIME_EXECUTION, "infer"):
                raise BeyondRange(BEYOND_RANGE.format(str(x.dtype).removeprefix("torch."),
                                                      str(narrower).removeprefix("torch.")))


def plugin_step(steps: Steps, stage: Stage, timer: str, call: Callable[[], Any]) -> Any:
    """`call` under `stage`, except that OpenVINO's shape inference rejecting a node of the model ("While validating
    node", which the plugin runs as it compiles, and at the first inference of dynamic shapes) fails at validation:
    the model the frontend made is invalid, whichever step found it."""
    invalid: RuntimeError | None = None
    with steps.at(stage, timer):
        try:
            return call()
        except RuntimeError as exc:
            if VALIDATING not in str(exc):
                raise
            invalid = exc
    with steps.at(Stage.VALIDATION, timer):
        raise invalid


def ov_tensor(x: np.ndarray | torch.Tensor) -> Any:
    """An input as an ov.Tensor: bfloat16 (a torch tensor) from its raw 16-bit words, anything else from numpy."""
    import openvino as ov

    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(x.shape)))
            tensor.data.view(np.uint16)[...] = x.contiguous().view(torch.int16).numpy().view(np.uint16)
            return tensor
        x = x.contiguous().numpy()
    return ov.Tensor(np.array(x, order="C"))  # a copy that keeps a 0-d array 0-d (ascontiguousarray makes it 1-d)


def oracle_array(tensor: Any) -> tuple[np.ndarray, str]:
    """An output tensor as the oracle takes it (bfloat16 widened to float32 storage, exactly) and its IR dtype name:
    OpenVINO's numpy view of a bf16 tensor is float16 of the same bits, so it is read from the words."""
    import openvino as ov

    data = np.array(tensor.data, copy=True)
    if tensor.get_element_type() == ov.Type.bf16:
        words = data.view(np.uint16).astype(np.uint32) << 16
        return words.view(np.float32), "bfloat16"
    return data, str(data.dtype)


def reference_outputs(model: Any, feeds: Sequence[np.ndarray | torch.Tensor]) -> tuple[np.ndarray, ...] | None:
    """`model` evaluated by OpenVINO's reference implementations (Model.evaluate), no plugin involved; None where it
    has no static output shapes or an operation has no reference evaluation."""
    import openvino as ov

    model = model.clone()
    model.reshape({i: ov.PartialShape(list(np.shape(x))) for i, x in enumerate(feeds)})
    if model.is_dynamic():
        return None
    outputs = [ov.Tensor(r.get_element_type(), r.get_shape()) for r in model.outputs]
    if not model.evaluate(outputs, [ov_tensor(x) for x in feeds]):
        return None
    return tuple(oracle_array(t)[0] for t in outputs)


def reference_labels(make: Callable[[], Any], feeds: Sequence[np.ndarray | torch.Tensor],
                     shows: Callable[[tuple[np.ndarray, ...]], bool]) -> tuple[str, ...]:
    """REFERENCE_WRONG or REFERENCE_RIGHT for the model `make` converts again; () where the reference cannot run it.
    Evidence, never a verdict: whatever fails here leaves no label."""
    try:
        outputs = reference_outputs(make(), feeds)
    except Exception:  # a reference gap (an operation it cannot evaluate) is no verdict on the case
        return ()
    if outputs is None:
        return ()
    return (REFERENCE_WRONG,) if shows(outputs) else (REFERENCE_RIGHT,)


def reference_evidence(labels: Sequence[str]) -> tuple[str, ...]:
    """The evidence OpenVINO's reference evaluation of the converted model left in a verdict's labels."""
    if REFERENCE_RIGHT in labels:
        return ("OpenVINO's reference evaluation (Model.evaluate) of the converted model computes the right outputs: "
                "the model is right and the CPU plugin computes it wrongly",)
    if REFERENCE_WRONG in labels:
        return ("OpenVINO's reference evaluation (Model.evaluate) of the converted model gives wrong outputs too: "
                "the frontend's translation is wrong",)
    return ()


def plugin_component(site: FaultSite) -> Component | None:
    """The CPU plugin, where the site shows the bug is its own: its compile (graph transformations), its inference
    (kernels), or a divergence of a model OpenVINO's reference evaluation computes right; None elsewhere. One
    component whichever frontend's model it ran, so both routes to a plugin bug are one root cause."""
    settings = f"(inference precision {site.options.get('precision', 'f32')})"
    if site.stage is Stage.RUNTIME_LOAD:
        name = f"CPU plugin: compiling a model {site.named()} {settings}"
    elif site.stage is Stage.RUNTIME_EXECUTION:
        name = f"CPU plugin: the inference of a model {site.named()} {settings}"
    elif REFERENCE_RIGHT in site.labels:
        name = f"CPU plugin: wrong values {site.named()} where OpenVINO's reference evaluation is right {settings}"
    else:
        return None
    return Component(PROJECT, name, TRACKER, PLUGIN_KEY, DISTRIBUTION)


def other_settings(name: str, options: CpuSettings, make: Callable[[dict[str, Any]], str]) -> list[Setting]:
    """The other precision hint (f32 where bf16 was asked) and the other performance hint, each as a Setting of
    converter `name`, `make` writing the user's line for its options."""
    data = options.to_json()
    changes: list[tuple[str, dict[str, Any]]] = []
    if options.precision != "f32":
        changes.append(("the CPU plugin at f32 (INFERENCE_PRECISION_HINT='f32')", {"precision": "f32"}))
    other = next(p for p in PERFORMANCE if p != options.performance)
    changes.append((f"the CPU plugin's {other} performance hint", {"performance": other}))
    return [Setting(what, name, {**data, **changed}, make({**data, **changed})) for what, changed in changes]
