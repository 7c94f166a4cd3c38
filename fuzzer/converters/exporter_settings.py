"""The settings a user of either torch.onnx exporter could change to avoid one of its bugs: a flag of its own, the
other exporter, the nearest other opsets, the ONNX Runtime level the exported model runs at (divergences). Both
exporters' opset ranges live here, so each can move a case's opset into the other's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuzzer.converters.ort_levels import OPTIMIZING_LEVELS
from fuzzer.converters.setting import Hints, Setting, nearest_opsets, session_level_code

SCRIPT, DYNAMO = "torch-onnx-script", "torch-onnx-dynamo"
SCRIPT_OPSETS = (7, 20)  # torch.onnx's ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET
DYNAMO_OPSETS = (18, 23)  # torchlib's translations start at opset 18


def export_call(dynamo: bool, opset: int, extra: str = "") -> str:
    """The torch.onnx.export line a user writes, with `extra` keyword arguments (", optimize=False")."""
    return f'torch.onnx.export(module, inputs, "model.onnx", dynamo={dynamo}, opset_version={opset}{extra})'


def exporter_settings(name: str, dynamo: bool, options: Mapping[str, Any], own: tuple[Setting, ...],
                      hints: Hints) -> tuple[Setting, ...]:
    """Exporter `name`'s settings, the likeliest to help for the least change first: its `own` flags (one argument),
    the other exporter (the usual way round a wrong translation), the nearest other opsets, and for a divergence the
    ONNX Runtime levels its model runs at (an optimizer may replace a wrong kernel: first where the blame is one).
    The opset from which ONNX takes the type a schema error names comes first of all."""
    opset = int(options["opset"])
    levels = tuple(Setting(f"ONNX Runtime's optimizations at level {lv} for the exported model", name, options,
                           session_level_code(lv), lv) for lv in OPTIMIZING_LEVELS) if hints.divergence else ()
    low, high = DYNAMO_OPSETS if dynamo else SCRIPT_OPSETS
    typed = hints.type_opset if opset < hints.type_opset <= high else 0
    first = (Setting(f"opset {typed} instead of {opset}, the first whose schema takes the type", name,
                     {**options, "opset": typed}, export_call(dynamo, typed)),) if typed else ()
    opsets = tuple(Setting(f"opset {o} instead of {opset}", name, {**options, "opset": o}, export_call(dynamo, o))
                   for o in nearest_opsets(opset, low, high) if o != typed)
    other = other_exporter(dynamo, opset, bool(options.get("dynamic")))
    return (*first, *levels, *own, other, *opsets) if hints.kernel else (*first, *own, other, *opsets, *levels)


def other_exporter(dynamo: bool, opset: int, dynamic: bool) -> Setting:
    """The other torch.onnx exporter, at the case's opset moved into its range (a dynamic export stays dynamic)."""
    other, (low, high) = (SCRIPT, SCRIPT_OPSETS) if dynamo else (DYNAMO, DYNAMO_OPSETS)
    moved = min(max(opset, low), high)
    return Setting(f"the other exporter, {other} (dynamo={not dynamo})", other,
                   {"opset": moved, **({"dynamic": True} if dynamic else {})}, export_call(not dynamo, moved))
