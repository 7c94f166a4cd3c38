"""A repair by re-conversion: where the converted model is no ONNX model to edit (an importer's TensorFlow or OpenVINO
model) or the edits did not make it pass, the converter's own settings that avoid a bug (its avoid_settings, as the
workaround search tries them) are tried on the same ONNX model, and one that passes the oracle on the inputs and, in
a second conversion, on fresh inputs is the repair."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx

from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import AvoidsBugs
from fuzzer.converters.setting import Hints
from fuzzer.modelcheck.conversions import OnnxPrepared, convert_onnx, onnx_source
from fuzzer.modelcheck.model import ModelKind, UserModel
from fuzzer.modelcheck.repair import Repair, Round
from fuzzer.support.errors import UsageError
from oracles.verdict import Symptom


def reconvert(prepared: OnnxPrepared, model: UserModel, converter: Converter, fresh: Sequence[np.ndarray],
              divergence: bool) -> Repair | None:
    """The first of the converter's settings that avoids the failure on the inputs and on `fresh` ones; None where
    the converter offers none."""
    if not isinstance(converter, AvoidsBugs):
        return None
    options = converter.options(prepared.options)
    offered = converter.avoid_settings(options, Hints(divergence=divergence))
    settings = [s for s in offered if s.converter == converter.name]
    if not settings:
        return None
    tried = []
    for setting in settings:
        tried.append(setting.description)
        again = dataclasses.replace(prepared, options={**prepared.options, **setting.options})
        if convert_onnx(again, converter).verdict.symptom is not Symptom.PASS:
            continue
        if _passes_fresh(again, model, converter, fresh):
            step = Round(None, ())
            return Repair((step,), None, True, f"re-converted with {setting.description} ({setting.code}): passes "
                                               "the oracle on the inputs and on fresh inputs")
    return Repair((Round(None, ()),), None, False, f"no setting of {converter.name} avoids it (tried: "
                                                   f"{'; '.join(tried)})")


def _passes_fresh(prepared: OnnxPrepared, model: UserModel, converter: Converter, fresh: Sequence[np.ndarray]) -> bool:
    """The converter under the same options on the same ONNX model, fed fresh inputs, judged against its run."""
    upstream = dataclasses.replace(model, kind=ModelKind.ONNX, onnx_model=onnx.load_from_string(prepared.data),
                                   inputs=tuple(fresh), module=None, keras=None)
    try:
        again = onnx_source(upstream)
    except UsageError:  # the model does not run on the fresh inputs: nothing to judge there
        return False
    again = dataclasses.replace(again, options=prepared.options)
    return convert_onnx(again, converter).verdict.symptom is Symptom.PASS
