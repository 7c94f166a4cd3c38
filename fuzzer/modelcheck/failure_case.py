"""The case folder of a failing conversion of the user's model, to file upstream: an ONNX tool's (or importer's)
failure cut down to the smallest subgraph of the ONNX model it received that still shows it (cut_case.py), its
repro.py run alone. An exporter's failure starts from the PyTorch or Keras model, which no ONNX cut can stand for:
it gets no case, and says so with the source layer it was located at."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import onnx

from fuzzer.cases.case_json import CASE_JSON, replayed
from fuzzer.converters.base import Converter
from fuzzer.converters.upstream import starts_upstream
from fuzzer.modelcheck.check_model import ModelResult, source_feeds
from fuzzer.modelcheck.cut import MAX_CUT_NODES
from fuzzer.modelcheck.cut_case import reduce_tool_finding
from fuzzer.modelcheck.model import ModelKind, UserModel
from fuzzer.support.quiet import library_output
from oracles.verdict import Symptom

# Of one converter's reduction, no larger cut is tried past it (the smallest failing one found is kept).
REDUCE_BUDGET_S = 60.0


@dataclass(frozen=True)
class FailureCase:
    """A failing conversion's case folder (None where none was written) and what it holds or why there is none."""

    folder: Path | None
    note: str
    seconds: float = 0.0

    def shown(self, base: Path | None = None) -> str:
        """The folder's path (relative to `base`, the folder holding it, where given), 'none' where there is none."""
        if self.folder is None:
            return "none"
        return str(self.folder.relative_to(base) if base is not None else self.folder)

    def to_json(self, base: Path | None = None) -> dict[str, object]:
        return {"folder": None if self.folder is None else self.shown(base), "note": self.note,
                "seconds": round(self.seconds, 3)}


def failure_case(model: UserModel, result: ModelResult, converter: Converter, seed: int, out_dir: Path,
                 budget_s: float = REDUCE_BUDGET_S) -> FailureCase | None:
    """The reduced case of a wrong or crashing conversion, written in `out_dir`; None where the conversion passes."""
    conversion = result.conversion
    verdict = conversion.verdict
    if not verdict.is_bug:
        return None
    if not starts_upstream(converter):
        return FailureCase(None, exporter_note(result) + again_line(model, converter.name, seed))
    if conversion.source_onnx is None:
        return FailureCase(None, "not reduced: the ONNX model it received is not at hand")
    if verdict.symptom in Symptom.divergences() and conversion.target_onnx is None:
        return FailureCase(None, "not reduced: its target is no ONNX model, so its wrong values are not located node "
                                 "by node")
    start = time.monotonic()
    source = conversion.source_onnx
    feeds, _ = source_feeds(source, model, seed)
    signature = verdict.signature or f"{verdict.symptom.json_name}-{converter.name}"
    with library_output():
        folder = reduce_tool_finding(onnx.load_from_string(source), feeds, converter, {}, signature,
                                     f"check:{model.label}", seed, out_dir, budget_s)
    seconds = time.monotonic() - start
    if folder is None:
        return FailureCase(None, f"not reduced: neither the model it received, given to it again, nor a cut of at "
                                 f"most {MAX_CUT_NODES} ONNX nodes shows it", seconds)
    return FailureCase(folder, case_note(folder), seconds)


def case_note(folder: Path) -> str:
    """'reduced to 3 ONNX nodes; its repro.py shows the failure alone' (or says it does not)."""
    nodes = json.loads((folder / CASE_JSON).read_text(encoding="utf-8"))["reduction"]["onnx_nodes"]
    shown = "shows the failure alone" if replayed(folder) else "does not show the failure alone"
    return f"reduced to {nodes} ONNX nodes; its repro.py {shown}"


def again_line(model: UserModel, converter: str, seed: int) -> str:
    """'; shown again by `convsmith check --zoo bert --seed 0 --converters X`' for a zoo entry or a PyTorch factory
    (which rebuild the very model); "" for a file, whose path the label may not hold."""
    zoo = model.label.startswith("zoo:")
    if not zoo and model.kind is not ModelKind.TORCH:
        return ""
    what = f"--zoo {model.label.removeprefix('zoo:')}" if zoo else model.label
    return f"; shown again by `convsmith check {what} --seed {seed} --converters {converter}`"


def exporter_note(result: ModelResult) -> str:
    """Why an exporter's failure has no case, and the source layer it was located at where one was."""
    rounds = result.repair.rounds if result.repair is not None else ()
    location = rounds[0].location if rounds else None
    layer = f"located at source layer {location.layer}" if location is not None and location.layer else \
        "no source layer located"
    return (f"not reduced: {result.conversion.converter} starts from the source model, which no ONNX cut can stand "
            f"for ({layer})")
