"""Bisecting one case folder: which library to install releases of (from its blame), how its repro.py runs under one
release (a cached environment of that release over the working venv), and the result kept in case.json and
report.md."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fuzzer.cases.case import CaseData
from fuzzer.cases.case_json import CASE_JSON, load_case_json
from fuzzer.cases.fault_site import fault_site
from fuzzer.cases.folder import read_case
from fuzzer.cases.fresh_replay import repro_detail
from fuzzer.cases.remedy import Bisection, ReleaseOutcome, ReleaseRun
from fuzzer.cases.report import render_report
from fuzzer.converters import CONVERTERS
from fuzzer.converters.describe import Component
from fuzzer.diagnosis.blame import runtime_kernel
from fuzzer.support.errors import UsageError
from fuzzer.support.files import atomic_write_text
from fuzzer.support.lock import installed_version
from fuzzer.support.release_envs import EnvError, ensure_env
from oracles.paths import portable

DEFAULT_TIMEOUT_S = 600  # one repro.py run: an export and a session of a reduced graph take seconds
_OUTCOMES = {0: ReleaseOutcome.PASSES, 1: ReleaseOutcome.BUG}  # repro.py's exit statuses; any other is ERROR


def candidate_components(case: CaseData) -> list[Component]:
    """The components a case can be blamed on, each declaring its distribution: its converter's at the fault site,
    the exporter's that made the model it received, and ONNX Runtime's kernels."""
    site = fault_site(case)
    found = [c.component(site) for c in (CONVERTERS.get(case.converter),
                                          CONVERTERS.get(str(case.converter_options.get("upstream"))))
             if c is not None]
    return [*found, runtime_kernel("", case.device)]


def blamed_distribution(case: CaseData, override: str = "") -> str:
    """The pip distribution to bisect: `override`, else the blamed component's (a case blamed before components
    named their distribution, or never blamed, takes its converter's component of the same project)."""
    if override:
        return override
    blame = case.blame
    if blame is not None and blame.component.distribution:
        return blame.component.distribution
    project = None if blame is None else blame.component.project
    for component in candidate_components(case):
        if component.distribution and project in (None, component.project):
            return component.distribution
    raise UsageError(f"{case.id}: cannot tell which library holds its bug (blamed on {project}): pass --library DIST")


def installed_release(distribution: str) -> str:
    """The working venv's release of `distribution`; a UsageError when it has none."""
    release = installed_version(distribution)
    if release is None:
        raise UsageError(f"{distribution} is not installed in this environment: nothing to bisect from")
    return release


@dataclass(frozen=True)
class ReproRunner:
    """Runs a case's repro.py under one release: the installed one in the working venv as it is, any other with
    its cached environment first on PYTHONPATH (built on first use)."""

    folder: Path
    distribution: str
    installed: str
    envs: Path
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __call__(self, version: str) -> ReleaseRun:
        environ = None
        if version != self.installed:
            try:
                environ = ensure_env(self.envs, self.distribution, version).environ()
            except EnvError as exc:
                return ReleaseRun(version, ReleaseOutcome.ERROR, str(exc)[:200])
        try:
            done = subprocess.run([sys.executable, "repro.py"], cwd=self.folder, env=environ, capture_output=True,
                                  text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return ReleaseRun(version, ReleaseOutcome.ERROR, f"repro.py ran past {self.timeout_s:g} s")
        outcome = _OUTCOMES.get(done.returncode, ReleaseOutcome.ERROR)
        detail = repro_detail(done.stdout, done.stderr)
        if outcome is ReleaseOutcome.ERROR:
            detail = f"repro.py exited {done.returncode}: {detail}"[:200]
        return ReleaseRun(version, outcome, detail)


@dataclass(frozen=True)
class TimedRun:
    """A release runner that prints each release as it finishes: version, outcome, seconds, what it said."""

    runner: ReproRunner

    def __call__(self, version: str) -> ReleaseRun:
        start = time.perf_counter()
        run = self.runner(version)
        installed = " (installed)" if version == self.runner.installed else ""
        print(f"  {self.runner.distribution} {version}{installed}: {run.outcome.value} "
              f"({time.perf_counter() - start:.1f} s) {run.detail}".rstrip(), flush=True)
        return run


def record_bisection(folder: Path, bisection: Bisection) -> None:
    """Keep `bisection` in the folder's case.json (the rest of it as it was) and re-render report.md, atomically."""
    data = load_case_json(folder)
    files = data.pop("files", None)
    data["bisection"] = bisection.to_json()
    if files is not None:
        data["files"] = files
    case = dataclasses.replace(read_case(folder), bisection=bisection)
    atomic_write_text(folder / CASE_JSON, portable(json.dumps(data, indent=1)) + "\n")
    atomic_write_text(folder / "report.md", portable(render_report(case)))


__all__ = ["ReproRunner", "TimedRun", "blamed_distribution", "installed_release", "record_bisection"]
