"""One test's result as the campaign records it: made in the worker (or by the supervisor for a lost worker),
sent over the pipe as JSON, committed to the database as a row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from oracles.verdict import Stage, Symptom, Verdict

OWN_ERROR = "own_error"  # the symptom of a test that hit a convsmith bug (see the errors table)
LOST_SYMPTOMS = Symptom.json_names(Symptom.lost_worker())  # a test whose worker died, hung or outgrew its memory


@dataclass(frozen=True)
class TestResult:
    """One graph x converter result: the verdict's essentials, timings, and the case folder it wrote."""

    __test__ = False  # not a pytest class

    idx: int
    seed: int
    converter: str
    symptom: str
    stage: str
    signature: str = ""
    is_bug: bool = False
    labels: tuple[str, ...] = ()
    message: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    case_dir: str | None = None
    rewrites: tuple[str, ...] = ()  # the converter's rewrites that changed the model (TargetRun.rewrites)
    # The filed signature the test hit first, where it then ran without that bug's culprit (culprit_cut.py).
    cut_from: str = ""
    # The graph operator a bug's root cause is filed under, where the verdict names one (culprit_cut.culprit_operator):
    # demotion narrows to it from the first hit.
    culprit: str = ""
    # The traits of this test beyond its graph's own (traits.py): those of the model an ONNX tool was given, and the
    # graph's and model's under the converter's trait setting.
    traits: tuple[str, ...] = ()
    # Per rewrite fired, the edge-case classes of what it matched (TargetRun.rewrite_classes).
    rewrite_classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The (converter, rewrite, class) target its unit was steered to (policy/class_steering.py), "" where none.
    steered: str = ""

    @classmethod
    def of_verdict(cls, idx: int, seed: int, verdict: Verdict, options: Mapping[str, Any] | None = None,
                   timings: Mapping[str, float] | None = None, wall_s: float = 0.0,
                   case_dir: str | None = None, rewrites: tuple[str, ...] = (), cut_from: str = "",
                   culprit: str = "", traits: tuple[str, ...] = (),
                   rewrite_classes: Mapping[str, tuple[str, ...]] | None = None, steered: str = "") -> TestResult:
        return cls(idx, seed, verdict.converter, verdict.symptom.json_name, verdict.stage.value, verdict.signature,
                   verdict.is_bug, tuple(verdict.labels), verdict.message, dict(options or {}), dict(timings or {}),
                   wall_s, case_dir, tuple(rewrites), cut_from, culprit, tuple(traits), dict(rewrite_classes or {}),
                   steered)

    @classmethod
    def own_error(cls, idx: int, seed: int, converter: str, options: Mapping[str, Any] | None = None,
                  timings: Mapping[str, float] | None = None, wall_s: float = 0.0) -> TestResult:
        """A test that hit a convsmith bug: counted, never filed as the converter's."""
        return cls(idx, seed, converter, OWN_ERROR, Stage.NONE.value, message="convsmith error (see the errors table)",
                   options=dict(options or {}), timings=dict(timings or {}), wall_s=wall_s)

    @property
    def reached_tool(self) -> bool:
        """Whether the test got as far as its converter: it did not end at the source (its upstream model failing,
        a kernel refusing a dtype) nor in our own error."""
        return self.stage != Stage.SOURCE.value and self.symptom != OWN_ERROR

    def to_message(self) -> dict[str, Any]:
        """The JSON message a worker sends."""
        # A shallow copy: asdict's deep copy of options and timings cost a tenth of a millisecond per test.
        return {"type": "result", **{name: getattr(self, name) for name in _FIELDS}, "labels": list(self.labels),
                "rewrites": list(self.rewrites), "traits": list(self.traits),
                "rewrite_classes": {name: list(found) for name, found in self.rewrite_classes.items()}}

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> TestResult:
        fields = {k: v for k, v in msg.items() if k != "type"}
        return cls(**{**fields, "labels": tuple(fields.get("labels", ())), "is_bug": bool(fields["is_bug"]),
                      "rewrites": tuple(fields.get("rewrites", ())), "traits": tuple(fields.get("traits", ())),
                      "rewrite_classes": {name: tuple(found) for name, found in
                                          fields.get("rewrite_classes", {}).items()}})


_FIELDS = tuple(f.name for f in fields(TestResult))
