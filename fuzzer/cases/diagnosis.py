"""What a case says of whose bug it is, as data: the cross-checks (the same graph and inputs elsewhere) and the
suggested fix (an edit of the target model that makes the outputs agree). Computed in crosscheck.py, repair.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzzer.converters.culprit import Culprit, from_sentence
from fuzzer.converters.describe import Component

SAME_BUG = "same bug"
PASSES = "passes"
OTHER_FAILURE = "other failure: "  # followed by a short description of the other verdict
SKIPPED = "skipped: "  # followed by why (the converter does not run here, an option it does not take)

# Names of the cross-checks the report reads (fuzzer/cases/diagnosis_report.py).
OTHER_EXPORTER = "{} (other exporter)"
AT_LEVEL = "ONNX Runtime, optimizations {}"  # an exporter's model at a level; at "disabled", the case's own run
BEFORE_TOOL = "model before the tool (upstream.onnx)"
BEFORE_ORT = "ONNX Runtime, optimizations disabled (upstream.onnx)"  # ort-optimizer's model before the tool


@dataclass(frozen=True, eq=False)
class CrossCheck:
    """One rerun of a case's graph and inputs under another converter, level or pass, and what it showed."""

    name: str  # "torch-onnx-dynamo (other exporter)", "ONNX Runtime, optimizations basic"
    outcome: str  # SAME_BUG, PASSES, OTHER_FAILURE + what, or SKIPPED + why
    converter: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    group: str = ""  # checks of one family (each onnxoptimizer pass alone) are reported as one line
    culprit: Culprit | None = None  # the rewrite the check's bisection named (ONNX Runtime's, at the case's level)

    def to_json(self) -> dict[str, Any]:
        culprit = {"culprit": self.culprit.to_json()} if self.culprit is not None else {}
        return {"name": self.name, "outcome": self.outcome, "converter": self.converter,
                "options": dict(self.options), "group": self.group, **culprit}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CrossCheck:
        converter = str(data.get("converter", ""))
        # A case written before the culprit was a value kept its sentence as the check's "detail".
        culprit = Culprit.from_json(data["culprit"]) if data.get("culprit") else \
            from_sentence(converter, str(data.get("detail", "")))
        return cls(str(data["name"]), str(data["outcome"]), converter, dict(data.get("options") or {}),
                   str(data.get("group", "")), culprit)


@dataclass(frozen=True, eq=False)
class Repair:
    """An edit of the target model after which the project's oracle finds its outputs agree with the source's."""

    kind: str  # attribute, weight, cast, rounding, modulo, constant
    edit: str  # "set AveragePool.count_include_pad = 1 on node /AveragePool"
    description: str  # one line: the conversion fault the edit points at
    tries: int  # edits judged, this one included
    model: bytes | None = field(default=None, repr=False)  # the repaired model (kept in memory, not in case.json)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "edit": self.edit, "description": self.description, "tries": self.tries}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Repair:
        return cls(str(data["kind"]), str(data["edit"]), str(data["description"]), int(data["tries"]))


@dataclass(frozen=True)
class Blame:
    """Who must change: the component, the evidence that decided it (one line each), whether it is settled, and
    whether the component is shared by several converters (root causes are then keyed by it)."""

    component: Component
    evidence: tuple[str, ...]
    settled: bool
    shared: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"component": self.component.to_json(), "evidence": list(self.evidence), "settled": self.settled,
                "shared": self.shared}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Blame:
        return cls(Component.from_json(data["component"]), tuple(str(e) for e in data.get("evidence", ())),
                   bool(data.get("settled", False)), bool(data.get("shared", False)))

    def file_with(self) -> str:
        """'**ONNX Runtime**: CPU kernel of `Tile` (https://github.com/microsoft/onnxruntime/issues)'."""
        where = f" ({self.component.tracker})" if self.component.tracker else ""
        return f"**{self.component.project}**: {self.component.name}{where}"
