"""How a converter describes itself in a report: the snippet that calls it, who owns it, and the component a bug is
in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzer.converters.culprit import Culprit
from oracles.rootcause import UNLOCALIZED
from oracles.verdict import Stage


@dataclass(frozen=True)
class Snippet:
    """How a report's few-line snippet calls a converter, as plain Python.

    An exporter's `lines` turn `module` and `inputs` (torch) into the ONNX `model` (a dynamic export's define the
    dims they mark first), a TensorFlow exporter's turn `fn` and `signature` into it; an ONNX-to-ONNX converter's
    turn `model` into the converted `model`; `level` is the ONNX Runtime optimization level the target then runs at.
    A target that runs elsewhere has `runs`: the lines that run it on `inputs` (arrays by input name) into `got`."""

    imports: tuple[str, ...]
    lines: tuple[str, ...]
    level: str = "disabled"
    from_torch: bool = False
    free_dims: bool = False  # the run fixes each named input dimension to the input's size
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Component:
    """The part of a project that must change for a bug to go: what it is called, where it is filed, and a stable key
    for root causes (the converter's name where the converter itself is at fault)."""

    project: str  # "PyTorch", "ONNX Runtime", "onnxoptimizer"
    name: str  # "TorchScript exporter: the symbolic of `floor_divide`"
    tracker: str  # the project's issue tracker ("" when unknown)
    key: str
    distribution: str = ""  # the pip distribution that holds its code ("onnxruntime"): what `convsmith bisect` installs

    def to_json(self) -> dict[str, str]:
        data = {"project": self.project, "name": self.name, "tracker": self.tracker, "key": self.key}
        return {**data, "distribution": self.distribution} if self.distribution else data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Component:
        return cls(str(data["project"]), str(data["name"]), str(data.get("tracker", "")), str(data["key"]),
                   str(data.get("distribution", "")))


@dataclass(frozen=True)
class FaultSite:
    """Where a converter's bug showed, as the converter needs it to name its guilty component."""

    stage: Stage
    operator: str  # the operator the root cause is filed under (a graph operator, or an ONNX op type)
    frame_owner: str = ""  # the top-level package of the innermost frame of a crash ("onnxscript", "torch")
    labels: tuple[str, ...] = ()  # the verdict's labels
    options: Mapping[str, Any] = field(default_factory=dict)
    # The rewrites named behind the bug: a bisection's, and the passes that show it alone (the cross-checks').
    culprits: tuple[Culprit, ...] = ()
    graph_ops: tuple[str, ...] = ()  # the operators of the case's graph

    def named(self) -> str:
        """How a component's name points at the operator: "of `sin`", "that emits ONNX `Not`" (an operator of the
        model the error names), or "of one of `a`, `b` (the error names none)"."""
        if self.operator[:1].isupper():
            return f"that emits ONNX `{self.operator}`"
        if self.operator == UNLOCALIZED and self.graph_ops:
            ops = ", ".join(f"`{op}`" for op in dict.fromkeys(self.graph_ops))
            return f"of one of {ops} (the error names none)"
        if self.operator in (UNLOCALIZED, ""):  # a real architecture's failure, not located to one of its operators
            return "of an operator the error does not name"
        return f"of `{self.operator}`"


class Owned:
    """Who maintains a converter and where its bugs go: what its maintainers call it (`display_name`, for report
    titles), its project ("" uses its name), their tracker, and the pip distribution of its own code (what a
    bisection installs); `component` names the part a bug that showed at a site is in."""

    name: str
    display_name: str = ""
    project: str = ""
    tracker: str = ""
    distribution: str = ""

    def component(self, site: FaultSite) -> Component:
        """The part of this converter a bug that showed at `site` is in (subclasses name their steps)."""
        return self.own_component(self.display_name or self.name)

    def label_evidence(self, labels: Sequence[str]) -> tuple[str, ...]:
        """What this converter's own checks found, read back from a verdict's labels, as evidence lines of a blame
        (none by default)."""
        return ()

    def own_component(self, name: str) -> Component:
        """A component of this converter's own project, keyed by the converter (its root causes stay its own)."""
        return Component(self.project or self.display_name or self.name, name, self.tracker, self.name,
                         self.distribution)
