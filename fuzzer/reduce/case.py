"""Reducing a saved case: the real converter, in a confined child process, is the judge of "same bug"; the
reduced case is checked in full there and written beside the original."""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer.cases.case import CaseData
from fuzzer.cases.case_json import REDUCED_SUFFIX
from fuzzer.cases.folder import publish_case_folder
from fuzzer.cases.fresh_replay import replay_and_record
from fuzzer.check.result import INVALID_INPUTS
from fuzzer.converters.upstream import NATIVE
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker, Job
from fuzzer.reduce.passes import PASSES, SHAPE_PASSES
from fuzzer.reduce.shrinker import ReduceResult, reduce_graph
from fuzzer.support.device import require_device
from fuzzer.support.files import STAGING_PREFIX
from generators.edit import prune
from generators.ir import Graph
from generators.ops.discontinuity import LABELS
from oracles.rootcause import UNLOCALIZED, error_class, exception_type, verdict_root_cause
from oracles.verdict import Symptom, Verdict

# Symptoms whose failure is an exception: it is the same failure only with the same exception type and error class.
RAISED = frozenset({Symptom.CRASH, Symptom.INVALID_MODEL})
# Labels a candidate may not gain: its inputs left the valid domain, or sit on a discontinuity the original did not.
GUARDED_LABELS = frozenset({INVALID_INPUTS, *LABELS})
# How often the full check of a reduced graph is tried before the reduction is given up: a defect in native code dies
# by SIGSEGV in one run and by SIGABRT (heap corruption) in the next, and a diagnosis that runs past the checker's
# timeout reads as a hang.
FINAL_TRIES = 3


def same_bug(original: Verdict, candidate: Verdict) -> bool:
    """The candidate shows the original's bug: the same signature, and no guarded label the original had not (a
    reduction must not trade the bug for invalid inputs or a rounding tie that happens to look alike)."""
    gained = (set(candidate.labels) - set(original.labels)) & GUARDED_LABELS
    return candidate.signature == original.signature and not gained


def same_failure(original: Verdict, candidate: Verdict) -> bool:
    """Both fail alike: the same converter, stage and symptom; for an exception, the same type and error class (a
    reduction that turned a TypeError into a ValidationError found another bug); for a death, the same signal."""
    if (candidate.converter, candidate.stage, candidate.symptom) != (original.converter, original.stage,
                                                                     original.symptom):
        return False
    if original.symptom in RAISED:
        return (exception_type(candidate.message) == exception_type(original.message)
                and error_class(candidate.message) == error_class(original.message))
    if original.symptom is Symptom.PROCESS_DEATH:
        return _signal(original.message) is not None and _signal(original.message) == _signal(candidate.message)
    return False


def same_defect(original: Verdict, graph: Graph, candidate: Verdict, candidate_graph: Graph) -> bool:
    """The candidate shows the original's failure (same_failure) at another operator: a crash raised at an
    innocent operator whose cause, an operator feeding it, fails alike alone. The candidate's failing operator is
    upstream of the original's (any of the graph's where the original names none)."""
    if not candidate.is_bug or not original.is_bug or not same_failure(original, candidate):
        return False
    carrier = verdict_root_cause(original.converter, original, graph.ops()).shown_operator
    found = verdict_root_cause(candidate.converter, candidate, candidate_graph.ops()).shown_operator
    if found in (UNLOCALIZED, carrier):
        return False
    return found in graph.ops() if carrier == UNLOCALIZED else found in upstream_ops(graph, carrier)


def keeps_computing_nodes(original: Verdict, graph: Graph, candidate_graph: Graph) -> bool:
    """A wrong shape that names no operator (outputs missing, whichever they are) is kept only by a graph whose
    outputs are all computed by operators that computed the original's: an output fed straight from an input, or
    by another operator, loses outputs for another reason."""
    if original.symptom is not Symptom.WRONG_SHAPE or original.diverging_op is not None:
        return True
    computed = {out: node.op for node in candidate_graph.nodes for out in node.outputs}
    involved = {node.op for node in graph.nodes if set(node.outputs) & set(graph.outputs)}
    return all(computed.get(out) in involved for out in candidate_graph.outputs)


def upstream_ops(graph: Graph, op: str) -> set[str]:
    """The operators of the nodes that feed, directly or not, any node of operator `op`."""
    producer = {out: node for node in graph.nodes for out in node.outputs}
    found: set[str] = set()
    todo = [t for node in graph.nodes if node.op == op for t in node.inputs]
    seen: set[str] = set()
    while todo:
        tensor = todo.pop()
        if tensor in seen or tensor not in producer:
            continue
        seen.add(tensor)
        found.add(producer[tensor].op)
        todo += producer[tensor].inputs
    return found


MAX_SUSPECTS = 3  # each suspect that does not keep the bug costs a check


def suspect_outputs(graph: Graph, verdict: Verdict) -> tuple[str, ...]:
    """The graph outputs the verdict points at, smallest cone first: those that diverged, else those downstream of
    the operator it blames."""
    if len(verdict.metrics) == len(graph.outputs) and not all(m.ok for m in verdict.metrics):
        found = [out for out, m in zip(graph.outputs, verdict.metrics, strict=True) if not m.ok]
    else:
        culprit = verdict.diverging_op or verdict_root_cause(verdict.converter, verdict, graph.ops()).shown_operator
        found = [out for out in graph.outputs if culprit in _cone(graph, out).ops()]
    if len(found) == len(graph.outputs):
        return ()  # no output stands out: dropping them one by one costs no more
    return tuple(sorted(found, key=lambda out: len(_cone(graph, out).nodes)))[:MAX_SUSPECTS]


def _cone(graph: Graph, output: str) -> Graph:
    return prune(dataclasses.replace(graph, outputs=(output,)))


def same_hang_or_death(original: Verdict, candidate: Verdict) -> bool:
    """Both hang in the same converter at the same stage, or both killed it by the same signal there. The signature
    of a hang or a death holds the frame its stack was caught in, which varies from run to run of one defect (a
    segfault in TensorFlow's C++ is caught wherever its Python stack then stood): a reduced graph that still hangs,
    or still dies so, was given up as another bug."""
    if original.converter != candidate.converter or original.stage is not candidate.stage:
        return False
    if original.symptom is candidate.symptom is Symptom.HANG:
        return True
    return (original.symptom is candidate.symptom is Symptom.PROCESS_DEATH
            and _signal(original.message) is not None and _signal(original.message) == _signal(candidate.message))


def _signal(message: str) -> str | None:
    found = re.search(r"killed by (SIG\w+|signal \d+)", message)
    return found.group(1) if found else None


def keeps_defect(original: Verdict, original_graph: Graph, verdict: Verdict, graph: Graph) -> bool:
    """The reducer's acceptance of `graph` and its `verdict`: the same bug, the same failure at an operator feeding
    the original's (see same_defect), or the same hang or death; and, for missing outputs, computed by the same
    operators."""
    if not keeps_computing_nodes(original, original_graph, graph):
        return False
    return (same_bug(original, verdict) or same_defect(original, original_graph, verdict, graph)
            or same_hang_or_death(original, verdict))


def signature_oracle(case: CaseData, checker: IsolatedChecker) -> Callable[[Graph], bool]:
    """is_same_bug for real converters: the candidate's verdict, from the isolated checker, keeps the defect."""

    def is_same_bug(graph: Graph) -> bool:
        try:
            job = Job(graph, case.seed, case.converter, case.converter_options, case.device, case.values)
            verdict = checker.verdict(job)
        except RuntimeError:  # a candidate that breaks convsmith itself is not the bug we are after
            return False
        return keeps_defect(case.verdict, case.graph, verdict, graph)

    return is_same_bug


class ReductionFailed(RuntimeError):
    """The reduced graph no longer shows the case's signature under the full check (e.g. it became flaky)."""


class NotReproducedAlone(ReductionFailed):
    """The case's own graph, checked alone in fresh processes, does not show its bug: what the campaign's worker
    died or hung of was something it had run before."""


@dataclass(frozen=True)
class Reduction:
    """A written reduced case: its folder and how the reduction went."""

    path: Path
    result: ReduceResult


def reduce_case(case: CaseData, out_dir: Path, checker: IsolatedChecker, budget_s: float = 60.0,
                original: str | None = None, shape_only: bool = False) -> Reduction:
    """Reduce a case and write '<id>-reduced' into `out_dir` (linked to `original` or the case id). `shape_only`:
    only the passes that take nodes away, options kept, no diagnosis (which costs it twice what its reduction
    does): a later run on the reduced case polishes and diagnoses it."""
    require_device(case.device, f"{case.id} (found on {case.device})")
    options, simplified = (dict(case.converter_options), []) if shape_only else simplest_options(case, checker)
    case = dataclasses.replace(case, converter_options=options)
    result = reduce_graph(case.graph, case.seed, signature_oracle(case, checker), budget_s,
                          passes=SHAPE_PASSES if shape_only else PASSES,
                          suspects=suspect_outputs(case.graph, case.verdict))
    job = Job(result.graph, case.seed, case.converter, options, case.device, case.values)
    record = {**result.to_json(), "options_set_to_default": simplified, "polished": not shape_only}
    if case.reduction is not None:  # a reduced case reduced again: the sizes it was found at stay
        earlier = {key: value for key, value in case.reduction.items() if key != "earlier"}
        record |= {key: earlier[key] for key in ("nodes_before", "size_before") if key in earlier}
        record["earlier"] = earlier
    # Written aside and checked before it takes its place: a reduced case reduced again is replaced only by a
    # case that still shows its bug.
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=f"{STAGING_PREFIX}reduce-"))
    try:
        written = _write_checked(case, job, staging, checker, original or case.id, record, not shape_only)
        # The checker's child is long-lived: only the case's repro.py, run in a fresh process, may say it reproduces.
        replay_and_record(written)
        path = publish_case_folder(written, out_dir / written.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Reduction(path, result)


def _write_checked(case: CaseData, job: Job, staging: Path, checker: IsolatedChecker, original: str,
                   record: dict[str, Any], diagnose: bool) -> Path:
    """Write the reduced case in `job` in full into `staging`, tried up to FINAL_TRIES times until its full check
    keeps the case's defect; ReductionFailed when no try does."""
    seen: list[str] = []
    for _ in range(FINAL_TRIES):
        written, verdict = checker.write_case(job, staging, reduced_id(case.id), original, record, diagnose=diagnose)
        if verdict.signature == case.signature or keeps_defect(case.verdict, case.graph, verdict, job.graph):
            return written
        seen.append(verdict.signature or verdict.symptom.json_name)  # a pass has no signature
        if verdict.symptom is Symptom.HANG and case.verdict.symptom is not Symptom.HANG:
            # The diagnosis runs the converter several times within one check's timeout: the case is written
            # undiagnosed, and polished (diagnosed) by a later reduction.
            diagnose, record = False, {**record, "polished": False}
    if job.graph == case.graph:  # nothing was taken away: the case itself does not show it
        raise NotReproducedAlone(f"{case.id}: checked alone, the case's own graph gives {', then '.join(seen)}, not "
                              f"{case.signature}: its bug does not reproduce outside the campaign's worker")
    raise ReductionFailed(f"{case.id}: the reduced graph gives {', then '.join(seen)} under the full check, "
                          f"not {case.signature}")


def simplest_options(case: CaseData, checker: IsolatedChecker) -> tuple[dict[str, Any], list[str]]:
    """The case's converter options with each one set back to its default where the bug stays (all at once first,
    then one at a time): a report names only the settings the bug needs. Also the names of those reset."""
    options = dict(case.converter_options)
    defaults = checker.registry[case.converter].options(None).to_json()
    # A native upstream stays: it is the model the tool received, not a setting (an exporter would rebuild it).
    kept = ("upstream",) if options.get("upstream") == NATIVE else ()
    # An option the case does not record (added since it was written) ran at its default: nothing to set back.
    changed = [key for key, value in defaults.items() if options.get(key, value) != value and key not in kept]

    def keeps_bug(trial: dict[str, Any]) -> bool:
        try:
            job = Job(case.graph, case.seed, case.converter, trial, case.device, case.values)
            return same_bug(case.verdict, checker.verdict(job))
        except RuntimeError:
            return False

    simplest = {**options, **{key: defaults[key] for key in changed}}
    if changed and keeps_bug(simplest):
        return simplest, changed
    reset = []
    for key in changed if len(changed) > 1 else ():
        if keeps_bug({**options, key: defaults[key]}):
            options[key] = defaults[key]
            reset.append(key)
    return options, reset


def reduced_id(case_id: str) -> str:
    return case_id if case_id.endswith(REDUCED_SUFFIX) else f"{case_id[:150]}{REDUCED_SUFFIX}"


__all__ = ["CheckerConfig", "IsolatedChecker", "NotReproducedAlone", "Reduction", "ReductionFailed", "reduce_case",
           "keeps_defect", "reduced_id", "same_bug", "same_defect", "same_failure", "signature_oracle"]
