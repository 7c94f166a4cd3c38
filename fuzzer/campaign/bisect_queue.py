"""`convsmith fuzz --bisect`: each new root cause's case, once reduced, is bisected across releases of the blamed
library by `convsmith bisect` in one background process at the lowest priority (niceness 19), logged in
`.logs/bisect.log`. The loop only polls it: a case waits until its reduced folder appears and is polished (the
polish replaces the folder a first, shape-only step wrote: reduce_queue.py), then joins the next batch, and at most
one process runs at a time. Cases left when the campaign ends are listed in the log (bisect them with
`convsmith bisect`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fuzzer.cases.case_json import is_polished, reduced_folder
from fuzzer.support.confine import detach_from_terminal_and_parent, lower_priority

BISECT_NICE = 19  # the lowest priority: a bisection only takes CPU that nothing else wants
BISECT_LOG = "bisect.log"
POLL_S = 5.0  # how often the loop looks for reduced cases and a finished process (a few stat calls)


def bisect_command(cases: Sequence[Path]) -> list[str]:
    """The command a batch runs: this convsmith's `bisect` on the reduced case folders."""
    return [sys.executable, "-m", "fuzzer", "bisect", *map(str, cases)]


@dataclass
class BisectQueue:
    """The cases waiting for their reduction or for the background process, and that process."""

    log_dir: Path
    wait_for_reduction: bool = True  # False: a campaign that does not reduce bisects its cases as they are
    command: Callable[[Sequence[Path]], list[str]] = bisect_command
    waiting: list[Path] = field(default_factory=list)
    ready: list[Path] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    last_poll: float = 0.0
    started: int = 0  # cases handed to a process

    def add(self, case_dir: Path) -> None:
        """A new root cause's case folder, bisected once reduced."""
        (self.waiting if self.wait_for_reduction else self.ready).append(case_dir)

    def step(self, now: float | None = None) -> None:
        """At most every POLL_S: move reduced cases to the batch, and start the batch when no process runs."""
        now = time.monotonic() if now is None else now
        if now - self.last_poll < POLL_S:
            return
        self.last_poll = now
        for case_dir in list(self.waiting):
            reduced = reduced_folder(case_dir)
            if reduced is not None and is_polished(reduced):
                self.waiting.remove(case_dir)
                self.ready.append(reduced)
        if self.proc is not None and self.proc.poll() is None:
            return
        self.proc = None
        if self.ready:
            self.proc = self._start(self.ready)
            self.started += len(self.ready)
            self.ready = []

    def _start(self, cases: Sequence[Path]) -> subprocess.Popen:
        def detach_and_yield() -> None:
            detach_from_terminal_and_parent()
            lower_priority(BISECT_NICE)

        with open(self.log_dir / BISECT_LOG, "a") as log:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            return subprocess.Popen(self.command(cases), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                    preexec_fn=detach_and_yield)

    def close(self) -> None:
        """Stop a running process (its release environments are built atomically, so none is left half) and list
        the cases not bisected in the log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._log("the campaign ended during a bisection: its cases may not be bisected")
        for case_dir in [*self.waiting, *self.ready]:
            self._log(f"{case_dir}: not bisected (run `convsmith bisect` on its reduced case)")

    def _log(self, line: str) -> None:
        with open(self.log_dir / BISECT_LOG, "a") as log:
            log.write(line + "\n")


__all__ = ["BISECT_NICE", "BisectQueue", "bisect_command"]
