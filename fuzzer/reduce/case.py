"""Reducing a saved case: the real converter as the judge of "same bug", the reduced case checked in full."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fuzzer.cases.case import case_from_check
from fuzzer.check.pipeline import CheckOptions, run_check
from fuzzer.check.result import INVALID_INPUTS
from fuzzer.reduce.shrinker import ReduceResult, reduce_graph
from fuzzer.support.device import require_device
from generators.ir import Graph
from generators.ops.discontinuity import LABELS
from oracles.verdict import Verdict

REDUCE_CHECK = CheckOptions(rerun=False, locate=True, culprit=False)  # locate: the signature depends on it


# Labels a candidate may not gain: its inputs left the valid domain, or sit on a discontinuity the original did not.
GUARDED_LABELS = frozenset({INVALID_INPUTS, *LABELS})


def same_bug(original: Verdict, candidate: Verdict) -> bool:
    """The candidate shows the original's bug: the same signature, and no guarded label the original had not (a
    reduction must not trade the bug for invalid inputs or a rounding tie that happens to look alike)."""
    gained = (set(candidate.labels) - set(original.labels)) & GUARDED_LABELS
    return candidate.signature == original.signature and not gained


def signature_oracle(seed: int, converter: str, options: Any, original: Verdict,
                     check_options: CheckOptions = REDUCE_CHECK, device: str = "cpu") -> Callable[[Graph], bool]:
    """is_same_bug for real converters: the candidate's verdict (on `device`) is `same_bug` as the original's."""

    def is_same_bug(graph: Graph) -> bool:
        try:
            verdict = run_check(graph, seed, converter, options, check_options, device).verdict
        except Exception:  # a candidate that breaks convsmith itself is not the bug we are after
            return False
        return same_bug(original, verdict)

    return is_same_bug


class ReductionFailed(RuntimeError):
    """The reduced graph no longer shows the case's signature under the full check (e.g. it became flaky)."""


def reduce_case(case: Any, budget_s: float = 60.0, original: str | None = None) -> tuple[Any, ReduceResult]:
    """Reduce a CaseData: the reduced case (id '<id>-reduced', linked to `original` or the case id) and stats."""
    require_device(case.device, f"{case.id} (found on {case.device})")
    oracle = signature_oracle(case.seed, case.converter, case.converter_options, case.verdict, device=case.device)
    result = reduce_graph(case.graph, case.seed, oracle, budget_s)
    reduced = case_from_check(result.graph, case.seed, case.converter, case.converter_options,
                              original=original or case.id, reduction=result.to_json(),
                              case_id_=reduced_id(case.id), device=case.device)
    if reduced.signature != case.signature:
        raise ReductionFailed(f"{case.id}: the reduced graph gives {reduced.signature} under the full check, "
                              f"not {case.signature}")
    return reduced, result


def reduced_id(case_id: str) -> str:
    return case_id if case_id.endswith("-reduced") else f"{case_id[:150]}-reduced"
