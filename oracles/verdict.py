"""The verdict on one (graph, converter) run: symptom, stage, metrics and signature, with stable JSON."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from oracles.compare import OutputComparison, Reason


class Symptom(enum.IntEnum):
    """What went wrong, ordered from benign to most specific; JSON uses the lowercase name."""

    PASS = 0
    UNSUPPORTED = 1  # a documented "not implemented" of an op/dtype: counted, not a bug
    CRASH = 2
    PROCESS_DEATH = 3
    HANG = 4
    OUT_OF_MEMORY = 5  # graphs are small, so running out of memory is suspicious: counted as a bug
    INVALID_MODEL = 6
    WRONG_SHAPE = 7
    WRONG_DTYPE = 8
    WRONG_VALUES = 9
    FLAKY = 10  # disagreed with its own rerun: labelled, never filed as a wrong value

    @property
    def is_bug(self) -> bool:
        return self not in (Symptom.PASS, Symptom.UNSUPPORTED, Symptom.FLAKY)

    @property
    def json_name(self) -> str:
        return self.name.lower()

    @classmethod
    def from_json_name(cls, name: str) -> Symptom:
        return cls[name.upper()]

    @property
    def is_divergence(self) -> bool:
        """The target ran and its outputs differ from the source's (shape, dtype or values)."""
        return self in Symptom.divergences()

    @classmethod
    def divergences(cls) -> tuple[Symptom, ...]:
        """The target ran but its outputs are wrong: shape before dtype before values, as symptom_of ranks them."""
        return (cls.WRONG_SHAPE, cls.WRONG_DTYPE, cls.WRONG_VALUES)

    @classmethod
    def lost_worker(cls) -> tuple[Symptom, ...]:
        """The conversion's process ended without an answer: its end (death, timeout, memory) is the evidence."""
        return (cls.PROCESS_DEATH, cls.HANG, cls.OUT_OF_MEMORY)

    @classmethod
    def crash_like(cls) -> tuple[Symptom, ...]:
        """What the published study counts as a crash: no usable model came out."""
        return (cls.CRASH, *cls.lost_worker(), cls.INVALID_MODEL)

    @staticmethod
    def json_names(symptoms: tuple[Symptom, ...]) -> tuple[str, ...]:
        """The JSON names of a group, for code that holds symptoms as text (case files, campaign tables)."""
        return tuple(s.json_name for s in symptoms)


class Stage(str, enum.Enum):
    """Where in the pipeline the symptom appeared; the value is the JSON name."""

    CAPTURE = "capture"  # trace/export capture of the torch program
    NODE_CONVERSION = "node_conversion"
    GRAPH_OPTIMIZATION = "graph_optimization"
    VALIDATION = "validation"  # onnx.checker, shape inference
    SERIALIZATION = "serialization"
    RUNTIME_LOAD = "runtime_load"
    RUNTIME_EXECUTION = "runtime_execution"
    SOURCE = "source"  # the source model itself failed: not a converter bug
    NONE = "none"


@dataclass(frozen=True)
class Verdict:
    """One run's outcome; `metrics` holds one comparison per graph output (empty when nothing ran)."""

    symptom: Symptom
    stage: Stage
    converter: str
    metrics: tuple[OutputComparison, ...] = ()
    signature: str = ""
    message: str = ""
    labels: tuple[str, ...] = ()
    diverging_op: str | None = None
    diverging_dtype: str | None = None

    @property
    def is_bug(self) -> bool:
        return self.symptom.is_bug and self.stage is not Stage.SOURCE

    def with_labels(self, *labels: str) -> Verdict:
        """A copy with extra labels, kept sorted and unique so JSON is stable."""
        return replace(self, labels=tuple(sorted(set(self.labels) | set(labels))))

    def to_json(self) -> dict[str, Any]:
        return {
            "symptom": self.symptom.json_name,
            "stage": self.stage.value,
            "converter": self.converter,
            "metrics": [m.to_json() for m in self.metrics],
            "signature": self.signature,
            "message": self.message,
            "labels": list(self.labels),
            "diverging_op": self.diverging_op,
            "diverging_dtype": self.diverging_dtype,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            symptom=Symptom.from_json_name(data["symptom"]),
            stage=Stage(data["stage"]),
            converter=data["converter"],
            metrics=tuple(OutputComparison.from_json(m) for m in data.get("metrics", ())),
            signature=data.get("signature", ""),
            message=data.get("message", ""),
            labels=tuple(data.get("labels", ())),
            diverging_op=data.get("diverging_op"),
            diverging_dtype=data.get("diverging_dtype"),
        )


_REASON_SYMPTOM = {Reason.SHAPE: Symptom.WRONG_SHAPE, Reason.DTYPE: Symptom.WRONG_DTYPE}


def symptom_of(metrics: Sequence[OutputComparison]) -> Symptom:
    """The symptom of a set of output comparisons: shape before dtype before values, or PASS."""
    failing = [_REASON_SYMPTOM.get(m.reason, Symptom.WRONG_VALUES) for m in metrics if not m.ok]
    return min(failing, default=Symptom.PASS)
