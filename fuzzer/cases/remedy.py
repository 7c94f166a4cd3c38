"""What a case says beyond whose bug it is, as data: since which release of the blamed library it shows (a
Bisection, from `convsmith bisect`) and the setting that avoids it until it is fixed (a Workaround, tried on the
reduced case and re-run). Computed in bisect and workaround modules; kept in case.json and report.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ReleaseOutcome(Enum):
    """What a case's repro.py showed under one release of the blamed library."""

    BUG = "bug"  # repro.py exit 1: the case's bug shows
    PASSES = "passes"  # exit 0: it does not
    ERROR = "error"  # the release would not install or import, or repro.py failed otherwise


@dataclass(frozen=True)
class ReleaseRun:
    """One release a case's repro.py ran under, and what it showed."""

    version: str
    outcome: ReleaseOutcome
    detail: str = ""  # one line: why ERROR, or repro.py's last line

    def to_json(self) -> dict[str, str]:
        return {"version": self.version, "outcome": self.outcome.value, "detail": self.detail}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReleaseRun:
        return cls(str(data["version"]), ReleaseOutcome(data["outcome"]), str(data.get("detail", "")))


@dataclass(frozen=True)
class Bisection:
    """Releases of the blamed library a case's repro.py ran under, oldest first, and the boundary found."""

    distribution: str  # "onnxruntime"
    runs: tuple[ReleaseRun, ...]  # oldest first
    first_bad: str = ""  # the oldest release that shows the bug with no later release tested passing
    last_good: str = ""  # the newest release before first_bad that passes ("" when none tested passes)

    def summary(self) -> str:
        """'a regression since onnxruntime 1.20.0 (1.19.2 does not show it)', 'present since at least ...'."""
        if not self.first_bad:
            return f"not shown by any release of {self.distribution} tested"
        if self.last_good:
            return f"a regression since {self.distribution} {self.first_bad} ({self.last_good} does not show it)"
        return (f"present since at least {self.distribution} {self.first_bad} (every release tested since shows "
                "it)")

    def to_json(self) -> dict[str, Any]:
        return {"distribution": self.distribution, "runs": [r.to_json() for r in self.runs],
                "first_bad": self.first_bad, "last_good": self.last_good}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Bisection:
        return cls(str(data["distribution"]), tuple(ReleaseRun.from_json(r) for r in data["runs"]),
                   str(data.get("first_bad", "")), str(data.get("last_good", "")))


@dataclass(frozen=True)
class Workaround:
    """The cheapest setting tried under which the reduced case's outputs agree (re-run to check it), or none."""

    tried: tuple[str, ...]  # every setting tried, cheapest first, one line each
    setting: str = ""  # the one that made the outputs agree; "" when none did
    converter: str = ""  # the registry converter the re-run used
    options: Mapping[str, Any] = field(default_factory=dict)  # its options, as case.json records options
    code: str = ""  # the line a user changes: "torch.onnx.export(model, args, f, dynamo=True)"
    level: str = ""  # the ONNX Runtime level the re-run ran the converter's model at ("": the converter's own)

    @property
    def found(self) -> bool:
        return bool(self.setting)

    def to_json(self) -> dict[str, Any]:
        return {"tried": list(self.tried), "setting": self.setting, "converter": self.converter,
                "options": dict(self.options), "code": self.code, "level": self.level}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Workaround:
        return cls(tuple(str(t) for t in data["tried"]), str(data.get("setting", "")),
                   str(data.get("converter", "")), dict(data.get("options") or {}), str(data.get("code", "")),
                   str(data.get("level", "")))
