"""What a campaign is (recorded in its database, so that a resume continues the same campaign) and where it keeps
its files."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import load_registry
from fuzzer.converters.capabilities import superseded_by

LOG_DIR = ".logs"
# A new campaign runs the TorchScript exporter's own test on this share of graphs where the dynamo exporter runs too:
# three in four exporter tests go to the exporter PyTorch develops (`convsmith fuzz --script-share` sets another).
SCRIPT_SHARE = 1 / 3


@dataclass(frozen=True)
class CampaignSpec:
    """What a campaign is, recorded in its database so a resume continues the same campaign."""

    seed_base: int
    converters: tuple[str, ...]
    worker: WorkerConfig
    max_tests: int | None = None  # units (graphs) over the whole campaign; None: until time or Ctrl-C
    # Where both exporters run, the share of graphs the TorchScript exporter's own test runs on (PyTorch keeps it in
    # maintenance; the dynamo exporter is its default): 1 in campaigns recorded before the split.
    script_share: float = 1.0

    def to_json(self) -> dict[str, Any]:
        worker = {k: v for k, v in self.worker.to_json().items() if k not in ("out_dir", "log_dir")}
        return {"seed_base": self.seed_base, "converters": list(self.converters), "worker": worker,
                "max_tests": self.max_tests, "script_share": self.script_share}

    @classmethod
    def from_json(cls, data: dict[str, Any], out_dir: Path) -> CampaignSpec:
        worker = dict(data["worker"], out_dir=str(out_dir), log_dir=str(out_dir / LOG_DIR))
        return cls(int(data["seed_base"]), tuple(data["converters"]), WorkerConfig.from_json(worker),
                   data.get("max_tests"), float(data.get("script_share", 1.0)))

    def converters_for(self, seed: int) -> list[str]:
        """The converters the graph of `seed` is tested with: every one, but where a converter runs beside the one
        that supersedes it (capabilities.Superseded: the TorchScript exporter beside dynamo's), the superseded one's
        own test on `script_share` of the graphs (drawn by the seed alone)."""
        if not self._superseded or random.Random(f"script:{seed}").random() < self.script_share:
            return list(self.converters)
        return [c for c in self.converters if c not in self._superseded]

    @functools.cached_property
    def _superseded(self) -> frozenset[str]:
        # Read once: the scheduler asks for every seed, and a registry may be a callable that builds one.
        registry = load_registry(self.worker.registry)
        return frozenset(c for c in self.converters if c in registry and superseded_by(registry[c]) in self.converters)


def case_folders(out_dir: Path) -> list[Path]:
    """The campaign's case folders (one per bug signature filed)."""
    return [p for p in Path(out_dir).iterdir() if p.is_dir() and not p.name.startswith(".")
            and (p / "case.json").exists()]
