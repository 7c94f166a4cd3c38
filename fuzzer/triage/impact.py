"""Which real architectures a root cause affects: the zoo architectures whose converted models contain its pattern,
the ONNX operators of its smallest case with the attributes and dtypes that select their behaviour
(fuzzer/triage/pattern.py), so that "found in a 3-node graph" reads beside "affects: bert, vit".

A case's pattern is read from the ONNX model the converter received (an ONNX tool's `upstream.onnx`), else the one it
wrote (an exporter's `model.onnx`), else the case's graph written straight to ONNX (an exporter that crashed before
writing one). The zoo's models are those of fuzzer/triage/zoo_models.py, made once and cached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from fuzzer.cases.case_head import read_case_head
from fuzzer.cases.case_json import CaseError
from fuzzer.cases.folder import MODEL, UPSTREAM_MODEL
from fuzzer.converters import ConverterRegistry
from fuzzer.support.quiet import library_output
from fuzzer.triage.model import RootCauseGroup
from fuzzer.triage.pattern import IndexedModel, Pattern, index_model, occurs_in, pattern_of
from fuzzer.triage.zoo_models import ZooExport, zoo_exports
from generators.onnx_native import to_onnx_model
from generators.zoo.registry import ZOO

MAX_PATTERN_NODES = 12  # a larger pattern is an unreduced case's whole graph: no real model holds it as it is
NATIVE_OPSET = 18
GRAPH_ORIGIN = "the case's graph as ONNX"


@dataclass(frozen=True)
class ZooModels:
    """The zoo's converted models, indexed once: (entry, exporter, model)."""

    models: tuple[tuple[str, str, IndexedModel], ...]
    entries: tuple[str, ...]  # every architecture with at least one converted model

    @classmethod
    def load(cls, exports: Sequence[ZooExport]) -> ZooModels:
        models = tuple((e.entry, e.exporter, index_model(onnx.load(str(e.path)))) for e in exports
                       if e.path is not None)
        return cls(models, tuple(sorted({entry for entry, _, _ in models})))


@dataclass(frozen=True)
class Impact:
    """The zoo architectures whose converted models hold a root cause's pattern (by which exporters' models)."""

    pattern: str  # the pattern's nodes as a report names them; "" where there is none
    origin: str  # the model it was read from
    nodes: int
    affected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # entry -> exporters whose model holds it
    searched: int = 0  # architectures searched
    note: str = ""  # why there is no pattern to search for
    # The root cause's own operator in the case (its first node of that op type) as a pattern alone, and the
    # architectures holding it: wider than the whole case's pattern, still exact about its attributes and dtypes.
    operator: str = ""
    operator_affected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def line(self) -> str:
        """'affects: bert, vit (of 32 zoo architectures)', 'affects: none (...)', or why it is not known; then the
        architectures holding the root cause's operator alone, where that is another pattern."""
        names = ", ".join(self.affected) or "none"
        text = f"affects: {names} (of {self.searched} zoo architectures)"
        if self.note:
            text = f"affects: not known ({self.note})"
        if self.operator and self.operator != self.pattern:
            text += f"; its {self.operator} alone: {', '.join(self.operator_affected) or 'none'}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "origin": self.origin, "nodes": self.nodes,
                "affected": {k: list(v) for k, v in self.affected.items()}, "searched": self.searched,
                "note": self.note, "operator": self.operator,
                "operator_affected": {k: list(v) for k, v in self.operator_affected.items()}}


def case_model(case_dir: Path) -> tuple[onnx.ModelProto, str] | None:
    """The ONNX model a case's pattern is read from, and which one it is; None where there is none."""
    for name in (UPSTREAM_MODEL, MODEL):
        if (case_dir / name).is_file():
            return onnx.load(str(case_dir / name)), name
    try:
        graph = read_case_head(case_dir).graph
    except CaseError:
        return None
    weights = {name: np.zeros(t.shape, dtype=t.dtype.numpy) for name, t in graph.weights.items()}
    model = to_onnx_model(graph, weights, NATIVE_OPSET)
    return (model, GRAPH_ORIGIN) if model is not None else None


def holding(pattern: Pattern, zoo: ZooModels) -> dict[str, tuple[str, ...]]:
    """Each architecture whose converted models hold `pattern`, with the exporters of those models."""
    affected: dict[str, list[str]] = {}
    for entry, exporter, model in zoo.models:
        if occurs_in(pattern, model):
            affected.setdefault(entry, []).append(exporter)
    return {k: tuple(v) for k, v in sorted(affected.items())}


def pattern_impact(pattern: Pattern, origin: str, zoo: ZooModels, operator: str = "") -> Impact:
    """The zoo architectures whose converted models hold `pattern`, and those holding its first node of the op type
    `operator` alone (where it has one)."""
    alone = next((Pattern((key,), ()) for key in pattern.nodes if key.op_type == operator), None)
    own = (alone.describe(), holding(alone, zoo)) if alone is not None else ("", {})
    if len(pattern.nodes) > MAX_PATTERN_NODES:
        note = f"its case has {len(pattern.nodes)} ONNX nodes, more than {MAX_PATTERN_NODES}: reduce it"
        return Impact(pattern.describe(), origin, len(pattern.nodes), {}, len(zoo.entries), note, *own)
    if not pattern.nodes:
        return Impact("", origin, 0, searched=len(zoo.entries), note="its case's model has no operator")
    return Impact(pattern.describe(), origin, len(pattern.nodes), holding(pattern, zoo), len(zoo.entries), "", *own)


def group_impact(group: RootCauseGroup, out_dir: Path, zoo: ZooModels) -> Impact:
    """The impact of one root cause, read from its smallest case."""
    case_dir = group.representative.case_dir
    if case_dir is None:
        return Impact("", "", 0, searched=len(zoo.entries), note="no case folder: found in a zoo model")
    found = case_model(Path(out_dir) / case_dir)
    if found is None:
        return Impact("", "", 0, searched=len(zoo.entries), note="its case has no ONNX model")
    model, origin = found
    return pattern_impact(pattern_of(model), origin, zoo, group.cause.operator)


def impacts(groups: Sequence[RootCauseGroup], out_dir: Path, zoo: ZooModels) -> dict[str, Impact]:
    """Each root cause's impact, by key."""
    return {g.key: group_impact(g, out_dir, zoo) for g in groups}


def zoo_impacts(groups: Sequence[RootCauseGroup], out_dir: Path, cache_dir: Path, registry: ConverterRegistry,
                progress: Callable[[str], None] | None = None) -> dict[str, Impact]:
    """Each root cause's impact on the zoo entries that build here (their converted models made once, cached in
    `cache_dir`, the libraries' chatter kept off the terminal); {} where none builds (the zoo extra is missing)."""
    entries = [entry for entry in ZOO.values() if entry.available()[0]]
    if not entries:
        return {}
    with library_output():
        exports = zoo_exports(cache_dir, entries, registry, progress)
    return impacts(groups, out_dir, ZooModels.load(exports))
