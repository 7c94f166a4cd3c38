"""Whether a failing conversion of the user's model is a root cause convsmith already knows: its root-cause key,
computed as a campaign's triage computes it (from its reduced case where there is one, else from its verdict with
the located operator), looked up among the known ones (the corpus's, a campaign's). Nothing is matched by
resemblance: the keys agree, or it is not a known root cause."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnx

from fuzzer.cases.case_head import root_cause_of
from fuzzer.cases.case_json import CaseError
from fuzzer.cases.known_causes import KnownCause
from fuzzer.modelcheck.check_model import ModelResult
from fuzzer.modelcheck.locate import produced
from oracles.rootcause import UNLOCALIZED, RootCause, verdict_root_cause
from oracles.verdict import Symptom


@dataclass(frozen=True)
class CauseMatch:
    """A failing conversion's root cause and the known one with its key, if any (`unmatched`: why none was
    looked up)."""

    cause: RootCause
    known: KnownCause | None = None
    unmatched: str = ""

    def line(self) -> str:
        if self.known is not None:
            return f"this is the known root cause {self.known.title} ({self.known.origin} {self.known.where})"
        why = f"; {self.unmatched}" if self.unmatched else ""
        return f"not a known root cause (key {self.cause.key}{why})"

    def to_json(self) -> dict[str, object]:
        known = None if self.known is None else {"title": self.known.title, "where": str(self.known.where),
                                                 "origin": self.known.origin}
        return {"key": self.cause.key, "title": self.cause.title(), "known": known, "unmatched": self.unmatched}


def result_root_cause(result: ModelResult, case: Path | None) -> RootCause | None:
    """The root cause of a failing conversion: its reduced case's (as triage reads a case), else its verdict's on a
    graph of no convsmith operators, the first wrong node's operator (the source's) as the diverging one."""
    verdict = result.conversion.verdict
    if not verdict.is_bug:
        return None
    if case is not None:
        try:
            return root_cause_of(case)
        except CaseError:  # unreadable: the verdict still says what it is
            pass
    located = located_operator(result) if verdict.symptom in Symptom.divergences() else None
    return verdict_root_cause(verdict.converter, dataclasses.replace(verdict, diverging_op=located), ())


def located_operator(result: ModelResult) -> str | None:
    """The operator of the first wrong node: the source node writing its value where the converter started from an
    ONNX model (as a reduced case names it), else the converted model's node."""
    rounds = result.repair.rounds if result.repair is not None else ()
    location = rounds[0].location if rounds else None
    if location is None:
        return None
    source = result.conversion.source_onnx
    if source is not None:
        model = onnx.load_from_string(source)
        index = produced(model).get(location.output)
        if index is not None:
            return model.graph.node[index].op_type
    return location.op_type


def match_known(cause: RootCause, known: Mapping[str, KnownCause]) -> CauseMatch:
    """The known root cause with `cause`'s key; a wrong model no operator was isolated for is matched with none
    (its key would say only whose and how)."""
    if cause.operator == UNLOCALIZED and cause.symptom in Symptom.json_names(Symptom.divergences()):
        return CauseMatch(cause, None, "no wrong node isolated, so not matched")
    return CauseMatch(cause, known.get(cause.key))
