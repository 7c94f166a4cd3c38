"""A campaign's finding in a zoo model (its evidence folder, `zoo/<signature>/` with `zoo.json`) reduced to a case
folder inside it: the architecture rebuilt at the finding's seed, the ONNX tool run again on the model its upstream
exporter wrote, and the failure cut down to its smallest subgraph (fuzzer/modelcheck/cut_case.py).

Only an ONNX tool's finding is reduced here: an exporter's starts from the PyTorch or Keras model, whose layers no
ONNX cut can stand for.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from fuzzer.check.zoo import EVIDENCE_RECORD, check_zoo, prepare_zoo
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.converters.upstream import cached_upstream, starts_upstream
from fuzzer.modelcheck.cut_case import reduce_tool_finding
from fuzzer.support.errors import UsageError
from generators.zoo.registry import ZOO


class NotReducible(UsageError):
    """A zoo finding this reduction does not take, or one that did not show again."""


def is_zoo_finding(folder: Path) -> bool:
    """Whether `folder` is a zoo finding's evidence folder."""
    return (Path(folder) / EVIDENCE_RECORD).is_file()


def reduce_zoo_finding(folder: Path, registry: ConverterRegistry, budget_s: float | None = None) -> Path:
    """The reduced case written inside the evidence `folder` (no larger cut tried once `budget_s` is spent);
    NotReducible where it cannot be made."""
    record = json.loads((Path(folder) / EVIDENCE_RECORD).read_text(encoding="utf-8"))
    name, options, seed = record["converter"], dict(record["options"]), int(record["seed"])
    converter = registry.get(name)
    if converter is None or not starts_upstream(converter) or converter.framework != "onnx":
        raise NotReducible(f"{folder.name}: {name} is not an ONNX tool: a zoo finding of an exporter is not reduced")
    entry = ZOO.get(record["entry"])
    if entry is None:
        raise NotReducible(f"{folder.name}: no zoo entry {record['entry']!r} here")
    prepared = prepare_zoo(entry.build(seed))
    result = check_zoo(prepared, converter, options)
    signature = record["verdict"]["signature"]
    if result.verdict.signature != signature:
        raise NotReducible(f"{folder.name}: {name} on {entry.name} at seed {seed} no longer shows it "
                           f"({result.verdict.symptom.json_name})")
    upstream = cached_upstream(prepared.source, options["upstream"], options["opset"])
    if upstream is None:
        raise NotReducible(f"{folder.name}: the upstream export of {entry.name} failed")
    model = onnx.load_from_string(upstream)
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    feeds = dict(zip(names, prepared.zoo.inputs, strict=True))
    reduced = reduce_tool_finding(model, feeds, converter, options, signature, f"zoo:{entry.name}", seed, folder,
                                  budget_s)
    if reduced is None:
        raise NotReducible(f"{folder.name}: no cut of the {entry.name} model shows the failure of {name}")
    return reduced
