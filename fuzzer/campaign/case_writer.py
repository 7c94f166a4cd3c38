"""The campaign writes every case folder: those its workers send, and those of tests whose worker was lost (no
tensors survive a death, so the source is made again here). A failure to write one is our own error, reported as
an OwnError and never the end of the campaign, but for a full device: that stops the campaign (DiskFull) before the
test that found the case is recorded, so a resume runs it again and writes its case."""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer.campaign.messages import CaseSent, OwnError, Step
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.case import CaseData, case_id, collect_versions, lost_case, remade_source
from fuzzer.cases.folder import read_case, write_case
from fuzzer.cases.wire import case_from_message
from fuzzer.check.pipeline import CheckOptions
from fuzzer.converters import ConverterRegistry
from fuzzer.diagnosis.blame import blame_case
from fuzzer.support.errors import DiskFull, is_disk_full
from generators.ir import Graph
from oracles.verdict import Verdict


@dataclass(frozen=True)
class CaseWriter:
    """Writes case folders in `out_dir` (one already there is kept: the first case of a signature wins)."""

    out_dir: Path
    registry: ConverterRegistry
    worker: WorkerConfig

    def stop_if_disk_full(self, exc: Exception, idx: int) -> None:
        """Raise DiskFull for a write that failed because the device is full: the campaign stops, resumable."""
        if is_disk_full(exc):
            raise DiskFull(f"no space left for the case of unit {idx} in {self.out_dir}") from exc

    def write_sent(self, idx: int, seed: int, msg: CaseSent) -> tuple[str | None, OwnError | None]:
        """Write the case folder a worker sent for unit `idx`: its name, or the error when it cannot be written."""
        try:
            case = case_from_message(msg.body)
            folder = write_case(self.out_dir, case, replace=msg.replace, converter=self.registry.get(case.converter))
        except Exception as exc:
            self.stop_if_disk_full(exc, idx)
            return None, OwnError(idx, seed, msg.converter, Step.CASE.value, "case",
                                  "writing a case a worker sent failed", traceback.format_exc())
        return folder.name, None

    def kept_undiagnosed(self, idx: int, seed: int, case_dir: str) -> tuple[CaseData | None, OwnError | None]:
        """The case in a folder whose worker died deciding whose bug it is, its blame now written from the evidence
        that needs no rerun (the rerun killed the worker); the error, where the folder cannot be read."""
        folder = self.out_dir / case_dir
        try:
            case = read_case(folder)
            converter = self.registry.get(case.converter)
            case = dataclasses.replace(case, blame=blame_case(case, None, converter))
            write_case(self.out_dir, case, replace=True, converter=converter)
            return case, None
        except Exception as exc:  # our code: the folder stays as it was sent
            self.stop_if_disk_full(exc, idx)
            return None, OwnError(idx, seed, None, Step.BLAME.value, "case",
                                  f"reading back the case {case_dir} failed", traceback.format_exc())

    def write_lost(self, idx: int, seed: int, verdict: Verdict, dump: str, graph: Graph | None,
                   options: dict[str, Any]) -> tuple[str | None, OwnError | None]:
        """The case folder name of a test whose worker died (None when there is none), and the error, if any."""
        name = case_id(verdict.signature)
        if (self.out_dir / name).exists() or graph is None:
            return (name if (self.out_dir / name).exists() else None), None
        try:
            converter = self.registry[verdict.converter]
            values = self.worker.values_for(seed).value
            source = remade_source(graph, seed, options, self.worker.device, values,
                                   CheckOptions(**self.worker.check).input_budget_s)
            case = lost_case(graph, seed, verdict.converter, options, verdict,
                             collect_versions(converter.distributions), dump, device=self.worker.device,
                             values=values, source=source)
            # No rerun here (it would die or hang again in the campaign's own process): the death's stack decides.
            case = dataclasses.replace(case, blame=blame_case(case, None, converter))
            return write_case(self.out_dir, case, converter=converter).name, None
        except Exception as exc:  # our code: keep fuzzing, keep the traceback
            self.stop_if_disk_full(exc, idx)
            return None, OwnError(idx, seed, verdict.converter, Step.CASE.value, "case",
                                  "writing the case of a lost worker failed", traceback.format_exc())
