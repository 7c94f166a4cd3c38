"""Locate, diagnose and repair a wrong converted ONNX model, round by round until it agrees with the source, and
prove the repair: the repaired model must pass the oracle on the inputs it was repaired on and on fresh ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from fuzzer.modelcheck.align import named_back
from fuzzer.modelcheck.diagnose import Finding, input_findings, node_findings
from fuzzer.modelcheck.locate import Location, locate
from fuzzer.modelcheck.runs import judge_all, run_onnx

ROUNDS = 4  # faults repaired one located node at a time, at most this many


@dataclass(frozen=True)
class Round:
    """One round: where the model went wrong (None for an input fault, found before any run) and what was found."""

    location: Location | None
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, object]:
        return {"located": None if self.location is None else self.location.to_json(),
                "diagnosis": [f.to_json() for f in self.findings]}


@dataclass(frozen=True)
class Repair:
    """The rounds, the repaired model (None when nothing could be edited) and whether it passed on both input sets."""

    rounds: tuple[Round, ...]
    model: bytes | None
    repaired: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"repaired": self.repaired, "reason": self.reason, "rounds": [r.to_json() for r in self.rounds]}


def passes(source: bytes, target: bytes, feeds: Mapping[str, np.ndarray]) -> bool:
    """Whether the target runs and every output is within tolerance of the source's."""
    expected = run_onnx(source, feeds)
    try:
        actual = run_onnx(target, feeds)
    except Exception:  # ONNX Runtime refused or failed on the candidate: it is not a repair
        return False
    return len(actual) == len(expected) and all(m.ok for m in judge_all(actual, expected))


def first_round(source: bytes, target: bytes, feeds: Mapping[str, np.ndarray]) -> Round:
    """The input faults if there are any (a model fed another layout cannot be compared node by node), else the
    first diverging node and what differs there."""
    src, tgt = onnx.load_from_string(source), onnx.load_from_string(target)
    inputs = input_findings(src, tgt)
    if inputs:
        runs = [f for f in inputs if passes(source, f.edit.apply(tgt).SerializeToString(), feeds)]
        return Round(None, tuple(runs[:1] or inputs[:1]))
    try:
        where = locate(source, target, feeds)
    except Exception:  # the converted model does not run: nothing to compare node by node
        return Round(None, ())
    return Round(where, tuple(node_findings(src, tgt, where)) if where else ())


def repair(source: bytes, target: bytes, feeds: Mapping[str, np.ndarray], fresh: Mapping[str, np.ndarray],
           rounds: int = ROUNDS) -> Repair:
    """Repair `target` against `source` one located node per round; repaired only when it passes on `feeds` and
    on `fresh` inputs."""
    done: list[Round] = []
    renamed = named_back(onnx.load_from_string(source), onnx.load_from_string(target))
    model = target if renamed is None else renamed.SerializeToString()
    for _ in range(rounds):
        if passes(source, model, feeds):
            break
        step = first_round(source, model, feeds)
        done.append(step)
        if not step.findings:
            break
        edited = onnx.load_from_string(model)
        for finding in step.findings:
            edited = finding.edit.apply(edited)
        model = edited.SerializeToString()
    named = "" if renamed is None else " (its values named back after the source's first)"
    if model == target or not any(r.findings for r in done):
        return Repair(tuple(done), None, False, f"no fault found that an edit can undo{named}")
    if not passes(source, model, feeds):
        return Repair(tuple(done), model, False, f"the edited model still fails the oracle{named}")
    if not passes(source, model, fresh):
        return Repair(tuple(done), model, False, f"the edited model fails the oracle on fresh inputs{named}")
    return Repair(tuple(done), model, True, f"passes the oracle on the inputs and on fresh inputs{named}")


def edited_and_verified(rounds: tuple[Round, ...], target: bytes, findings: Sequence[Finding],
                        agrees: Callable[[bytes, Mapping[str, np.ndarray]], bool], feeds: Mapping[str, np.ndarray],
                        fresh: Mapping[str, np.ndarray]) -> Repair:
    """`target` with every finding's edit applied, repaired only where `agrees(model, inputs)` holds on the inputs and
    on fresh ones: an exporter's repair, judged against the framework it exported from."""
    edited = onnx.load_from_string(target)
    for finding in findings:
        edited = finding.edit.apply(edited)
    model = edited.SerializeToString()
    if not agrees(model, feeds):
        return Repair(rounds, model, False, "the edited model still fails the oracle")
    if not agrees(model, fresh):
        return Repair(rounds, model, False, "the edited model fails the oracle on fresh inputs")
    return Repair(rounds, model, True, "passes the oracle on the inputs and on fresh inputs")
