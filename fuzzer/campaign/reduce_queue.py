"""Background minimization of a campaign's new bug cases, one `convsmith reduce` subprocess at a time.

Reduction runs converters again, so it gets the same isolation as a test: a subprocess, its own time budget,
killed when it overruns. The reduced case is written inside its original folder (`<case>/<id>-reduced`), so
the campaign folder keeps one case folder per signature. A case that failed to reduce is listed in
`.logs/reduce_failed.txt` and not retried on resume; one never reached is queued again on resume.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fuzzer.cases.folder import CaseError, root_cause_of
from fuzzer.support.confine import detach_from_terminal_and_parent

GRACE_S = 60.0  # on top of the budget: process start-up and the final full check
FAILED_LIST = "reduce_failed.txt"


def _cause(case_dir: Path) -> str:
    """The case's root-cause key; a case folder that cannot be read is its own (the reducer will say why)."""
    try:
        return root_cause_of(case_dir).key
    except CaseError:
        return f"unreadable:{case_dir.name}"


def is_reduced(case_dir: Path) -> bool:
    return any(p.is_dir() and p.name.endswith("-reduced") for p in case_dir.iterdir())


@dataclass
class ReduceQueue:
    """Case folders waiting for reduction; `step()` starts the next when none is running.

    The first case of each root cause goes first: a root cause is filed with its smallest case, and a reduced case
    localizes its operator better; more signatures of a root cause it already has wait behind."""

    log_dir: Path
    budget_s: float
    pending: collections.deque[Path] = field(default_factory=collections.deque)
    later: collections.deque[Path] = field(default_factory=collections.deque)
    causes: set[str] = field(default_factory=set)  # root causes with a case reduced or queued
    running: tuple[Path, subprocess.Popen, float] | None = None
    reduced: int = 0
    failed: int = 0

    def failed_names(self) -> set[str]:
        path = self.log_dir / FAILED_LIST
        return set(path.read_text().split()) if path.exists() else set()

    def requeue(self, case_dirs: list[Path]) -> None:
        """On resume: every case neither reduced nor known to fail (the root causes already reduced first)."""
        failed = self.failed_names()
        waiting = []
        for case_dir in sorted(case_dirs):
            if is_reduced(case_dir):
                self.causes.add(_cause(case_dir))
            elif case_dir.name not in failed:
                waiting.append(case_dir)
        for case_dir in waiting:
            self.add(case_dir)

    def add(self, case_dir: Path) -> None:
        cause = _cause(case_dir)
        (self.later if cause in self.causes else self.pending).append(case_dir)
        self.causes.add(cause)

    @property
    def waiting(self) -> int:
        return len(self.pending) + len(self.later)

    def step(self) -> None:
        if self.running is not None:
            case_dir, proc, started = self.running
            if proc.poll() is None and time.monotonic() - started < self.budget_s + GRACE_S:
                return
            self._finish(case_dir, proc)
        if self.pending or self.later:
            case_dir = (self.pending or self.later).popleft()
            command = [sys.executable, "-m", "fuzzer", "reduce", str(case_dir), "--time", f"{self.budget_s}s",
                       "--out", str(case_dir)]
            with open(self.log_dir / "reduce.log", "a") as log:
                proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=detach_from_terminal_and_parent)
            self.running = (case_dir, proc, time.monotonic())

    def _finish(self, case_dir: Path, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        self.running = None
        if code == 0:
            self.reduced += 1
            return
        self.failed += 1
        with open(self.log_dir / FAILED_LIST, "a") as handle:
            handle.write(f"{case_dir.name}\n")

    def drain(self) -> None:
        """Reduce every pending case now (a campaign that finished its tests has nothing better to do)."""
        while self.running is not None or self.pending or self.later:
            self.step()
            time.sleep(0.2)

    def close(self, wait_s: float) -> None:
        """Give the running reduction up to `wait_s` seconds, then stop it; pending cases stay for a resume."""
        if self.running is None:
            return
        deadline = time.monotonic() + wait_s
        while self.running[1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        case_dir, proc, _ = self.running
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            self.running = None  # interrupted, not failed: a resume queues it again
            return
        self._finish(case_dir, proc)
