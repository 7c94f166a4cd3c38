"""What case.json says of a case without reading its tensors: enough to triage it and name its root cause."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer.cases.case_json import CaseError, case_folder, load_case_json, recorded_options, reduction_polished
from fuzzer.cases.diagnosis import Blame
from generators.ir import Graph, GraphError
from oracles.rootcause import RootCause, verdict_root_cause
from oracles.verdict import Verdict


@dataclass(frozen=True)
class CaseHead:
    """What case.json says of a case, without reading its tensors: enough to triage it."""

    converter: str
    graph: Graph
    verdict: Verdict
    options: Mapping[str, Any]
    blame: Blame | None = None
    polished: bool = True  # False for a reduced case a shape-only step left (reduce_queue.py)
    # A case cut from a real model (fuzzer/modelcheck/cut_case.py): its ONNX nodes (its graph has none); else 0.
    onnx_nodes: int = 0

    @property
    def owner(self) -> str:
        """Whose root cause this is: the blamed component's where the evidence settles it or it is shared (an ONNX
        Runtime kernel reached by several converters, the exporter whose model a tool received already wrong),
        else the converter's."""
        blame = self.blame
        return blame.component.key if blame is not None and (blame.shared or blame.settled) else self.converter

    @property
    def root_cause(self) -> RootCause:
        return verdict_root_cause(self.owner, self.verdict, self.graph.ops())


def read_case_head(path: Path) -> CaseHead:
    """The converter, graph, verdict and options of a case folder (or its case.json); CaseError when unreadable."""
    folder = case_folder(path)
    data = load_case_json(folder)
    try:
        blame = Blame.from_json(data["blame"]) if data.get("blame") else None
        return CaseHead(data["converter"], Graph.from_json(data["graph"]), Verdict.from_json(data["verdict"]),
                        recorded_options(data["converter"], data["converter_options"]), blame,
                        reduction_polished(data.get("reduction")),
                        int((data.get("reduction") or {}).get("onnx_nodes", 0)))
    except (KeyError, GraphError, TypeError, ValueError, AttributeError) as exc:
        raise CaseError(f"{folder}: malformed case.json ({type(exc).__name__}: {exc})") from None


def root_cause_of(path: Path) -> RootCause:
    """The root cause of a case folder, from its case.json alone."""
    return read_case_head(path).root_cause
