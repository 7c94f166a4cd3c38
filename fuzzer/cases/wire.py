"""A bug case as a worker hands it to the campaign, which writes every case folder: case.json's fields and the log
as JSON, the tensors and models packed (fuzzer.support.tensors.pack_arrays) and base64-encoded in the same message,
so a case and the result that names it cross the pipe in one frame. Never a pickle."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

from fuzzer.cases.case import CaseData
from fuzzer.cases.case_json import case_fields
from fuzzer.support.tensors import pack_arrays, unpack_arrays

# Keys of the packed arrays: "<group>:<index>" for each tensor group, "w:<name>" for a weight, a model's own name.
_GROUPS = {"i": "inputs", "e": "expected", "r": "reference",
           "I": "second_inputs", "E": "second_expected", "R": "second_reference"}
_MODELS = {"model": "model", "upstream": "upstream_model"}


def case_message(case: CaseData) -> dict[str, Any]:
    """The "case" message of `case`: JSON-ready, and enough to write its folder exactly as the worker would have."""
    arrays: dict[str, np.ndarray] = {f"w:{name}": np.asarray(x) for name, x in case.weights.items()}
    for key, field in _GROUPS.items():
        arrays |= {f"{key}:{i}": np.asarray(x) for i, x in enumerate(getattr(case, field))}
    for key, field in _MODELS.items():
        model = getattr(case, field)
        if model is not None:
            arrays[key] = np.frombuffer(bytes(model), dtype=np.uint8)
    index, data = pack_arrays(arrays)
    return {"type": "case", "case": case.to_json(), "log": case.log, "arrays": index,
            "data": base64.b64encode(data).decode("ascii")}


def case_from_message(msg: Mapping[str, Any]) -> CaseData:
    """The CaseData a "case" message carries; a CaseError when its fields do not read."""
    fields = case_fields(msg["case"], "a worker's case message")
    arrays = unpack_arrays(msg["arrays"], base64.b64decode(msg["data"]))
    groups = {field: _group(arrays, key) for key, field in _GROUPS.items()}
    models = {field: arrays[key].tobytes() if key in arrays else None for key, field in _MODELS.items()}
    weights = {key[2:]: x for key, x in arrays.items() if key.startswith("w:")}
    return CaseData(**fields, weights=weights, log=msg["log"], **groups, **models)


def _group(arrays: Mapping[str, np.ndarray], key: str) -> tuple[np.ndarray, ...]:
    group: list[np.ndarray] = []
    while f"{key}:{len(group)}" in arrays:
        group.append(arrays[f"{key}:{len(group)}"])
    return tuple(group)
