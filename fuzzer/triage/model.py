"""What triage works on and hands out: findings (one per bug signature) and root causes (what gets fixed)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oracles.rootcause import (
    ANY_OPERATOR,
    RootCause,
    listed_operators,
    quoted_error,
    root_cause,
)

REDUCED, UNREDUCED, NOT_REPRODUCED = "reduced", "unreduced", "not reproduced alone"  # Finding.reduction_state


@dataclass(frozen=True)
class Finding:
    """One bug signature of a campaign, read from its database row and its (reduced, where there is one) case."""

    signature: str
    converter: str
    stage: str
    symptom: str
    message: str
    diverging_op: str | None
    graph_ops: tuple[str, ...]  # the operators of the graph the root cause is computed on
    seed: int
    hits: int
    first_seen: float  # seconds since the epoch
    case_dir: str | None = None  # relative to the campaign folder: the reduced case where there is one
    reduced: bool = False
    nodes: int = 0  # operators in that graph
    dtypes: tuple[str, ...] = ()  # the dtypes of the graph's tensors
    options: Mapping[str, Any] = field(default_factory=dict)
    upstream: str | None = None  # the exporter an ONNX-to-ONNX converter started from
    owner: str | None = None  # a shared component blamed for it (fuzzer/diagnosis/blame.py): its root cause's owner
    polished: bool = True  # its reduced case is polished, not only shape-reduced (reduce_queue.py)
    # Its case's repro.py showed its bug in a fresh process (True), did not or the reducer marked it (False), or no
    # such replay is recorded (None): case_json.case_reproduces.
    reproduces: bool | None = None
    filed_title: str = ""  # its case's report.md title (the owner's vocabulary: ONNX operators for an ONNX tool)

    @property
    def from_zoo(self) -> bool:
        """Whether it is a zoo finding, filed as an evidence folder under zoo/ rather than a case."""
        return (self.case_dir or "").startswith("zoo/")

    @property
    def reduction_state(self) -> str:
        """'reduced', 'unreduced', or 'not reproduced alone' (a case that no reduction can keep)."""
        if self.reproduces is False:
            return NOT_REPRODUCED
        return REDUCED if self.reduced else UNREDUCED

    @property
    def root_cause(self) -> RootCause:
        return root_cause(self.owner or self.converter, self.stage, self.symptom, self.message, self.diverging_op,
                          self.graph_ops)


@dataclass(frozen=True)
class RootCauseGroup:
    """One root cause and its evidence: every signature, dtype and converter option it was seen with."""

    cause: RootCause
    findings: tuple[Finding, ...]
    known: bool = False  # a corpus case has this root cause

    @property
    def key(self) -> str:
        return self.cause.key

    @property
    def representative(self) -> Finding:
        """The smallest case: one whose repro.py showed its bug in a fresh process, then one never replayed, reduced
        before unreduced, a graph case before a zoo finding (a whole architecture, counted as no operators), then
        fewest operators, then the first seen."""
        replayed = {True: 0, None: 1, False: 2}
        return min(self.findings, key=lambda f: (replayed[f.reproduces], not f.reduced, f.from_zoo, f.nodes,
                                                 f.first_seen))

    @property
    def title(self) -> str:
        """The root cause's title: its representative's filed title (report.md's, or a zoo finding's naming its
        architecture) where the cause names one operator or none, or has one finding; else the key's, its error
        quoted from the representative case where the key's normalized class has placeholders (`<n>`, `<name>`)
        for the message's numbers and names."""
        rep = self.representative
        filed = rep.filed_title
        # What was filed, in the owner's words, where the cause names one operator or none (a zoo finding names its
        # architecture), or has one finding whose case says more than a shared path's key.
        one = self.cause.operator != ANY_OPERATOR or (len(self.findings) == 1 and not rep.from_zoo)
        if filed and one:
            return filed
        text, klass = self.shown_cause.title(), self.cause.error_class
        if "<" not in klass or not text.endswith(klass):  # a class without placeholders says it better
            return text
        return text.removesuffix(self.cause.error_class) + quoted_error(self.representative.message)

    @property
    def shown_cause(self) -> RootCause:
        """The cause as titled: one keyed by a shared code path names every operator its findings met there."""
        examples = list(dict.fromkeys(f.root_cause.example for f in self.findings if f.root_cause.example))
        if self.cause.operator != ANY_OPERATOR or len(examples) < 2:
            return self.cause
        return dataclasses.replace(self.cause, example=listed_operators(examples))

    @property
    def hits(self) -> int:
        return sum(f.hits for f in self.findings)

    @property
    def first_seen(self) -> float:
        return min(f.first_seen for f in self.findings)

    @property
    def converters(self) -> tuple[str, ...]:
        return tuple(sorted({f.converter for f in self.findings}))

    def to_json(self) -> dict[str, Any]:
        rep = self.representative
        return {
            "key": self.key, "title": self.title, "converter": self.cause.converter,
            "stage": self.cause.stage, "symptom": self.cause.symptom, "operator": self.cause.operator,
            "error_class": self.cause.error_class, "cause_class": self.cause.cause.value, "known": self.known,
            "hits": self.hits, "first_seen": self.first_seen, "representative": rep.case_dir,
            "representative_reduced": rep.reduced, "representative_reproduces": rep.reproduces,
            "representative_nodes": rep.nodes,
            "signatures": sorted(f.signature for f in self.findings), "seen_under": list(self.converters),
            "dtypes": sorted({d for f in self.findings for d in f.dtypes}),
            "options": sorted({_options_text(f.options) for f in self.findings}),
        }


def _options_text(options: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(options.items()))

