"""Whose bug a campaign's finding in a zoo model is, decided when it is first filed (model_blame.py's rules), judged
at the entry's tolerance as the finding was: against the source's outputs, or for an ONNX tool against what the
model it received computes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fuzzer.cases.diagnosis import Blame
from fuzzer.check.zoo import ZooResult, judge_outputs
from fuzzer.check.zoo_source import ZooSource
from fuzzer.converters.base import Converter
from fuzzer.diagnosis.model_blame import WholeModel, model_blame


def zoo_blame(prepared: ZooSource, converter: Converter, result: ZooResult,
              options: Mapping[str, Any] | None = None) -> Blame:
    """The blame of a zoo finding; `options`: the converter's, as it ran."""
    name = prepared.zoo.entry.name
    feeds = {spec.name: np.asarray(x) for spec, x in zip(prepared.zoo.entry.inputs, prepared.zoo.inputs)}

    def judge(outputs: Sequence[np.ndarray], wanted: Sequence[np.ndarray]) -> tuple[int, str] | None:
        judged = judge_outputs(prepared, outputs, wanted, result.computed_in)
        if not judged.failing:
            return None
        first = judged.metrics[judged.failing[0]]
        return judged.failing[0], f"{first.reason.value}, max_abs={first.max_abs:.3g}"

    received = result.baseline is not None
    whole = WholeModel(f"on zoo model `{name}`", feeds, result.baseline if received else prepared.eager, judge,
                       received, f"zoo model `{name}`")
    return model_blame(converter, result.verdict, result.model, whole, options)
