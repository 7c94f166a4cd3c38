"""`convsmith check MODEL` end to end: every applicable converter's verdict, and for each wrong ONNX target the
located node, the diagnosis and the repair, re-verified on fresh inputs (against the ONNX model an ONNX tool started
from, the PyTorch module or the Keras model an exporter started from)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from tqdm import tqdm

from fuzzer.converters.base import Converter
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.role import Role
from fuzzer.modelcheck.conversions import (
    Conversion,
    OnnxPrepared,
    TorchPrepared,
    TupleOutputs,
    applicable,
    convert_onnx,
    convert_torch,
    onnx_source,
    torch_source,
)
from fuzzer.modelcheck.exporter_repair import repair_export
from fuzzer.modelcheck.keras_conversions import KerasPrepared, convert_keras, keras_source
from fuzzer.modelcheck.keras_repair import repair_keras_export
from fuzzer.modelcheck.locate import named_in_message
from fuzzer.modelcheck.model import InputSlot, ModelKind, UserModel, draw_inputs, onnx_slots
from fuzzer.modelcheck.reconvert import reconvert
from fuzzer.modelcheck.repair import Repair, Round, repair
from fuzzer.support.quiet import library_output
from oracles.verdict import Symptom


def convert_model(model: UserModel, converter: Converter, prepared: object = None) -> Conversion:
    """The converter's verdict on the model (`prepared` once for all converters)."""
    if model.kind is ModelKind.KERAS:
        return convert_keras(prepared if isinstance(prepared, KerasPrepared) else keras_source(model), converter)
    if model.kind is ModelKind.ONNX:
        onnx_prepared = prepared if isinstance(prepared, OnnxPrepared) else onnx_source(model)
        return convert_onnx(onnx_prepared, converter)
    return convert_torch(prepared if isinstance(prepared, TorchPrepared) else torch_source(model), converter)


@dataclass(frozen=True)
class ModelResult:
    """One converter on the model: its conversion, and the repair where the target was wrong and is ONNX."""

    conversion: Conversion
    repair: Repair | None
    repair_seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {**self.conversion.verdict.to_json(), "timings": dict(self.conversion.timings),
                "repair": None if self.repair is None else self.repair.to_json(),
                "repair_seconds": self.repair_seconds}


def source_feeds(source: bytes, model: UserModel, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inputs the source ONNX model takes, by its own names (an exporter's model is fed in order), and fresh
    ones of the same shapes drawn from another seed."""
    proto = onnx.load_from_string(source)
    slots = onnx_slots(proto)
    given = model.feeds()
    inputs = [given[s.name] for s in slots] if all(s.name in given for s in slots) else list(model.inputs)
    fresh = draw_inputs([InputSlot(s.name, tuple(x.shape), str(x.dtype)) for s, x in zip(slots, inputs)], seed + 1)
    fresh = [x if x.dtype.kind == "f" else given_x for x, given_x in zip(fresh, inputs)]  # ids may index a table
    return {s.name: x for s, x in zip(slots, inputs)}, {s.name: x for s, x in zip(slots, fresh)}


def check_model(model: UserModel, registry: ConverterRegistry, wanted: Sequence[str], seed: int,
                fix: bool = True, prepared: object = None) -> list[ModelResult]:
    """Each converter's verdict; a wrong target that is an ONNX model, with an ONNX model it started from, is
    located, diagnosed and repaired (where `fix`). `prepared`: the model's prepare(), where the caller made it."""
    results = []
    converters = applicable(model, registry, wanted)
    prepared = prepare(model) if prepared is None else prepared
    # A bar on a terminal only (disable=None): a large model takes minutes per converter.
    for converter in tqdm(converters, desc=model.label, unit="converter", disable=None, leave=False):
        with library_output():
            conversion = convert_model(model, converter, prepared)
        results.append(_with_repair(model, conversion, seed, prepared, converter) if fix
                       else ModelResult(conversion, None))
    return results


def prepare(model: UserModel) -> object:
    """The model made ready once for every converter (its Source, its own outputs, the exporter's model the ONNX
    tools share)."""
    if model.kind is ModelKind.KERAS:
        with library_output():
            return keras_source(model)
    return torch_source(model) if model.kind is ModelKind.TORCH else onnx_source(model)


def _with_repair(model: UserModel, conversion: Conversion, seed: int, prepared: object, converter: Converter
                 ) -> ModelResult:
    verdict = conversion.verdict
    if not verdict.is_bug or verdict.symptom is Symptom.UNSUPPORTED:
        return ModelResult(conversion, None)
    start = time.perf_counter()
    with library_output():
        fixed = _edited(model, conversion, seed)
        upstream = prepared if isinstance(prepared, OnnxPrepared) else getattr(prepared, "upstream", None)
        if (fixed is None or not fixed.repaired) and isinstance(upstream, OnnxPrepared) and \
                conversion.role is not Role.EXPORTER:
            again = reconvert(upstream, model, converter, fresh_inputs(model, seed),
                              verdict.symptom is Symptom.WRONG_VALUES)
            fixed = _either(fixed, _with_failing_node(again, upstream.data, verdict.message))
    return ModelResult(conversion, fixed, time.perf_counter() - start)


def _edited(model: UserModel, conversion: Conversion, seed: int) -> Repair | None:
    """The repair by edits of a wrong ONNX target, against what it came from; None where there is no ONNX target."""
    target = conversion.target_onnx
    if target is None:
        return None
    if conversion.source_onnx is not None:
        feeds, fresh = source_feeds(conversion.source_onnx, model, seed)
        return repair(conversion.source_onnx, target, feeds, fresh)
    if conversion.role is Role.EXPORTER and model.module is not None:
        feeds, fresh = source_feeds(target, model, seed)
        return repair_export(TupleOutputs(model.module).eval(), target, feeds, fresh)
    if conversion.role is Role.EXPORTER and model.keras is not None:
        feeds, fresh = source_feeds(target, model, seed)
        return repair_keras_export(model.keras, target, feeds, fresh)
    return None


def _either(edited: Repair | None, again: Repair | None) -> Repair | None:
    """The edits' rounds and the re-conversion's verdict where it repaired; else the edits' repair, saying that no
    setting helped either."""
    if again is None:
        return edited
    if edited is None:
        return again
    if again.repaired:
        return Repair(edited.rounds, None, True, again.reason)
    return dataclasses.replace(edited, reason=f"{edited.reason}; {again.reason}")


def _with_failing_node(again: Repair | None, model: bytes, message: str) -> Repair | None:
    """The re-conversion's repair, its round naming the node the converter's failure message names, where it does."""
    where = named_in_message(model, message) if again is not None and message else None
    if again is None or where is None:
        return again
    return dataclasses.replace(again, rounds=(Round(where, ()), *again.rounds[1:]))


def fresh_inputs(model: UserModel, seed: int) -> tuple[np.ndarray, ...]:
    """Inputs of the model's shapes from another seed (integer inputs kept: they may index a table)."""
    drawn = draw_inputs(model.slots, seed + 1)
    return tuple(x if x.dtype.kind == "f" else given for x, given in zip(drawn, model.inputs, strict=True))
