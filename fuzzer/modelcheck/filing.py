"""What each failing conversion of the user's model is filed as: its reduced case folder (failure_case.py, where
the check writes a folder) and its root cause, known or not (known_cause.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from fuzzer.cases.known_causes import KnownCause
from fuzzer.converters.registry import ConverterRegistry
from fuzzer.modelcheck.check_model import ModelResult
from fuzzer.modelcheck.failure_case import REDUCE_BUDGET_S, FailureCase, failure_case
from fuzzer.modelcheck.known_cause import CauseMatch, match_known, result_root_cause
from fuzzer.modelcheck.model import UserModel


@dataclass(frozen=True)
class Filing:
    """A failing conversion's case (None where no folder was asked for) and its root cause's match."""

    case: FailureCase | None
    cause: CauseMatch

    def to_json(self, base: Path | None = None) -> dict[str, object]:
        """Its JSON, the case folder's path relative to `base` where given."""
        return {"case": None if self.case is None else self.case.to_json(base), "root_cause": self.cause.to_json()}

    def lines(self, base: Path | None = None) -> list[str]:
        """The case and the root cause as list items, the case folder's path relative to `base` where given."""
        case = [] if self.case is None else [f"- upstream case: {self.case.shown(base)} ({self.case.note})"]
        return [*case, f"- {self.cause.line()}"]


def file_results(model: UserModel, results: Sequence[ModelResult], registry: ConverterRegistry, seed: int,
                 known: Mapping[str, KnownCause], out: Path | None = None,
                 budget_s: float = REDUCE_BUDGET_S) -> dict[str, Filing]:
    """Each failing conversion's filing, by converter; its case is reduced into `out`/<converter> where `out` is
    given."""
    filings = {}
    # A bar on a terminal only (disable=None): each reduction may take up to its budget.
    for result in tqdm(results, desc="filing", unit="converter", disable=None, leave=False):
        name = result.conversion.converter
        case = failure_case(model, result, registry[name], seed, out / name, budget_s) if out is not None else None
        cause = result_root_cause(result, case.folder if case is not None else None)
        if cause is not None:
            filings[name] = Filing(case, match_known(cause, known))
    return filings
