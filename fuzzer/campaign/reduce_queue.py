"""Background minimization of a campaign's new bug cases by long-lived `convsmith reduce --stdin` processes.

Reduction runs converters again, so it gets a test's isolation: each reducer is a subprocess (its candidates run
in a confined child of its own, so a case that segfaults or hangs reduces too), and a case that overruns its
budget is given up with its reducer. One reducer runs beside the workers from the campaign's first case, at a lower
priority (REDUCER_NICE), so it takes the CPU the tests leave, and one more for each LAG_S of first steps waiting
(up to one per worker): a campaign that finds cases faster than one reducer clears them then trades some tests for
reduced cases, rather than ending with a backlog. When the tests end, one per worker drains the queue.
`reserve_s` tells the campaign how long that drain would take, which it keeps back from the tests as far as its
budget allows (budget.py); a drain with a deadline starts no case queued before it after it, and stops at its end.

Each case is reduced in two steps (`reduce --shape-first`): first by the passes that take nodes away, which name its
culprit, then, once no case waits for that, polished (dims, ranks, attributes, values, options) and diagnosed (whose
bug it is) in place. A campaign that finds cases faster than they reduce thus leaves them small rather than some
polished and the rest as found.

The reduced case is written inside its original folder (`<case>/<id>-reduced`), so the campaign folder keeps one
case folder per signature. A case that failed to reduce is listed in `.logs/reduce_failed.txt` and not retried on
resume; one never reached is queued again on resume. A case whose own graph does not show its bug when checked alone
(the worker died or hung of what it had run before) is kept, marked with NOT_REPRODUCED.txt, and counted apart.

A case filed after the drain's deadline (by a unit that finished in its grace) is still started while the per-case
mean fits before the drain's end: it was in no reserve, and a reducer is free for it.
"""

from __future__ import annotations

import collections
import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from fuzzer.cases.case_head import root_cause_of
from fuzzer.cases.case_json import UNREPRODUCED_NOTE, CaseError, is_polished, reduced_folder
from fuzzer.support.confine import detach_from_terminal_and_parent, lower_priority
from fuzzer.support.files import atomic_write_text
from fuzzer.support.scratch import scratch_root, sweep_once_dead
from oracles.verdict import Symptom

GRACE_S = 60.0  # on top of a case's budget: the reducer's first start and the final full check
# And this many check timeouts more: the check in flight when the budget ends and the final full check may each take
# up to one (a hang waits it out; a large onnx2tf graph's checks take tens of seconds), which alone passed the budget
# and GRACE_S. The limit is there for a reducer that stopped answering, not for a slow case.
CHECK_TIMEOUTS = 2
FAILED_LIST = "reduce_failed.txt"
REDUCE_CHILD_LOGS = "reduce-children"
FIRST_GUESS_S = 10.0  # seconds per case before any has been reduced
# The guess counts as this many cases in the mean: one slow first case (22.9 s, against 15.2 s for the same case on
# a calmer machine) taken as the mean had cut a 3-minute campaign's testing from 103 s to 43 s.
GUESS_WEIGHT = 3
START_S = 8.0  # a reducer's start-up (Python, torch, its checker child)
# The niceness of the reducer beside the tests (and of its checker child), as the campaign process's own
# (supervisor.CAMPAIGN_NICE): the workers' tests come first. The drain's reducers keep the campaign's priority.
REDUCER_NICE = 5
# First steps waiting that one reducer would take longer than this to clear get a second reducer beside the tests
# (and so on, up to one per worker): one reducer at REDUCER_NICE beside as many workers as cores falls behind a
# campaign that finds a case every few seconds, and a case left unreduced is no report to file.
LAG_S = 300.0
STOP_GRACE_S = 10.0  # an idle reducer's own exit: its checker child stops and sweeps its temp folder


def _cause(case_dir: Path) -> tuple[str, bool]:
    """The case's root-cause key, and whether it hangs; a case folder that cannot be read is its own (the reducer
    will say why)."""
    try:
        cause = root_cause_of(case_dir)
    except CaseError:
        return f"unreadable:{case_dir.name}", False
    return cause.key, cause.symptom == Symptom.HANG.json_name


@dataclass(frozen=True)
class ReducerConfig:
    """What every reducer process gets: the per-case budget and the campaign's converters and limits."""

    budget_s: float
    registry: str
    timeout_s: float = 60.0
    memory_mb: int = 4096

    def hang_case_s(self) -> float:
        """What a case that hangs takes: its budget (each candidate that still hangs waits out the timeout) and the
        final full check, which hangs too."""
        return self.budget_s + self.timeout_s

    def limit_s(self) -> float:
        """How long a reducer may take on one case before it is given up: the budget, GRACE_S and CHECK_TIMEOUTS
        check timeouts."""
        return self.budget_s + GRACE_S + CHECK_TIMEOUTS * self.timeout_s

    def command(self) -> list[str]:
        return [sys.executable, "-m", "fuzzer", "reduce", "--stdin", "--inside", "--shape-first",
                "--time", f"{self.budget_s}s",
                "--timeout", f"{self.timeout_s}s", "--memory-mb", str(self.memory_mb), "--registry", self.registry]


@dataclass
class Reducer:
    """One `convsmith reduce --stdin` process and the case it is on."""

    proc: subprocess.Popen
    case_dir: Path | None = None  # a case folder, or a reduced one it polishes
    since: float = 0.0
    buffer: bytes = b""
    polishing: bool = False

    def send(self, case_dir: Path, polishing: bool = False) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{case_dir}\n".encode())
        self.proc.stdin.flush()
        self.case_dir, self.since, self.polishing = case_dir, time.monotonic(), polishing

    def replies(self) -> list[dict]:
        """The JSON lines it has written so far (without blocking); other lines are library noise."""
        out: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        while select.select([out], [], [], 0)[0]:
            chunk = os.read(out.fileno(), 65536)
            if not chunk:
                break
            self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.startswith(b'{"case"')]

    def end_input(self) -> None:
        """No more cases: an idle reducer then ends by itself, closing its checker child (which sweeps that child's
        temp folder); a killed one leaves that to the sweep after it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def stop(self, grace_s: float = 0.0) -> None:
        """Kill it, after up to `grace_s` seconds for an ended input to end it."""
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@dataclass
class ReduceQueue:
    """Case folders waiting for reduction; `step(n)` keeps up to n reducers busy.

    The first case of each root cause goes first: a root cause is filed with its smallest case, and a reduced case
    localizes its operator better; more signatures of a root cause it already has wait behind. A case hit again
    while it waits goes before them all (hit)."""

    log_dir: Path
    config: ReducerConfig
    pending: collections.deque[Path] = field(default_factory=collections.deque)
    later: collections.deque[Path] = field(default_factory=collections.deque)
    polish: collections.deque[Path] = field(default_factory=collections.deque)  # reduced folders, not yet polished
    causes: set[str] = field(default_factory=set)  # root causes with a case reduced or queued
    hanging: set[Path] = field(default_factory=set)  # the cases that hang, waiting or running
    reducers: list[Reducer] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # per reduced or failed case (its first step)
    queued_at: dict[Path, float] = field(default_factory=dict)  # time.monotonic() each waiting case was queued
    reduced: int = 0
    failed: int = 0  # of which `unreproduced` did not show their bug alone
    unreproduced: int = 0
    polished: int = 0
    reduced_beside: int | None = None  # of `reduced`, those done while the campaign tested (set by drain)

    def failed_names(self) -> set[str]:
        path = self.log_dir / FAILED_LIST
        return set(path.read_text().split()) if path.exists() else set()

    def requeue(self, case_dirs: list[Path]) -> None:
        """On resume: every case neither reduced nor known to fail (the root causes already reduced first)."""
        failed = self.failed_names()
        waiting = []
        for case_dir in sorted(case_dirs):
            reduced = reduced_folder(case_dir)
            if reduced is not None:
                self.causes.add(_cause(case_dir)[0])
                if reduced.name not in failed and not is_polished(reduced):
                    self.polish.append(reduced)
            elif case_dir.name not in failed:
                waiting.append(case_dir)
        for case_dir in waiting:
            self.add(case_dir)

    def add(self, case_dir: Path) -> None:
        """Queue a new case: the first of its root cause first. One that hangs takes its whole budget and a timeout
        (hang_case_s), and is counted so in the reserve; put behind the other root causes, it had waited until the
        campaign ended."""
        cause, hangs = _cause(case_dir)
        (self.later if cause in self.causes else self.pending).append(case_dir)
        self.queued_at[case_dir] = time.monotonic()
        self.causes.add(cause)
        if hangs:
            self.hanging.add(case_dir)

    def hit(self, case_dir: Path) -> None:
        """A waiting case whose bug a test met again goes first: until its reduced case names the culprit to cut
        (culprit_cut.py), a bug whose error names no operator ends every test that meets it."""
        for queue in (self.pending, self.later):
            if case_dir in queue:
                queue.remove(case_dir)
                self.pending.appendleft(case_dir)
                return

    @property
    def waiting(self) -> int:
        return len(self.pending) + len(self.later)

    @property
    def busy(self) -> int:
        return sum(r.case_dir is not None for r in self.reducers)

    def reserve_s(self, reducers: int) -> float:
        """Seconds `reducers` reducers would take to reduce every waiting and running case, from the mean so far
        (with the first guess counted as GUESS_WEIGHT cases, so the first few do not swing it)."""
        return self.estimate_s(reducers, time.monotonic())

    def per_case_s(self) -> float:
        """The mean seconds of a first step so far, with the first guess counted as GUESS_WEIGHT cases."""
        return (sum(self.seconds) + GUESS_WEIGHT * FIRST_GUESS_S) / (len(self.seconds) + GUESS_WEIGHT)

    def reducers_beside(self, workers: int) -> int:
        """How many reducers run beside `workers` workers' tests: one, and one more per LAG_S of first steps
        waiting, at most one per worker."""
        return max(1, min(workers, 1 + int(self.waiting * self.per_case_s() // LAG_S)))

    def estimate_s(self, reducers: int, now: float) -> float:
        """reserve_s at `now`: a running case counts for what the per-case mean leaves of it."""
        if not self.waiting and not self.busy:
            return 0.0
        per_case, hang_s = self.per_case_s(), self.config.hang_case_s()
        running = [max((hang_s if r.case_dir in self.hanging else per_case) - (now - r.since), 0.0)
                   for r in self.reducers if r.case_dir is not None]
        starts = START_S if self.waiting and len(self.reducers) < reducers else 0.0
        hangs = sum(case in self.hanging for queue in (self.pending, self.later) for case in queue)
        waiting_s = (self.waiting - hangs) * per_case + hangs * hang_s
        # A case runs on one reducer: the longest one left bounds the time however many reducers share the rest.
        return starts + max((waiting_s + sum(running)) / max(reducers, 1), max(running, default=0.0))

    def step(self, reducers: int = 1, nice: int = REDUCER_NICE, hand_out: bool = True,
             late: tuple[float, float] | None = None) -> None:
        """Collect finished cases, give up on overrunning ones, and (with `hand_out`) hand waiting cases to idle
        reducers among the first `reducers`, starting up to that many at niceness `nice` (one started when more
        were wanted waits idle, without CPU, until they are again). With `late` (queued since, done by), only the
        cases queued since then whose expected time ends by then."""
        for reducer in list(self.reducers):
            self._collect(reducer)
        if not hand_out:
            return
        while self._next_case(late) and len(self.reducers) < reducers and all(r.case_dir for r in self.reducers):
            self.reducers.append(self._start(nice))
        for reducer in self.reducers[:reducers]:
            found = self._next_case(late)
            if reducer.case_dir is None and found:
                queue, case_dir = found
                queue.remove(case_dir)
                self.queued_at.pop(case_dir, None)
                try:
                    reducer.send(case_dir, polishing=queue is self.polish)
                except OSError:  # it died since it was collected: the case waits for the next reducer
                    queue.appendleft(case_dir)
                    reducer.case_dir = None
                    reducer.stop()
                    self.reducers.remove(reducer)

    def _next(self) -> collections.deque[Path] | None:
        """The queue the next case comes from: a case to reduce before a reduced one to polish."""
        return next((q for q in (self.pending, self.later, self.polish) if q), None)

    def _next_case(self, late: tuple[float, float] | None) -> tuple[collections.deque[Path], Path] | None:
        """The next case and its queue; with `late` (queued since, done by), the first case to reduce queued since
        then whose expected time (a hang's whole budget) ends by then."""
        if late is None:
            queue = self._next()
            return (queue, queue[0]) if queue else None
        since, done_by = late
        left_s = done_by - time.monotonic()
        for queue in (self.pending, self.later):
            for case_dir in queue:
                need_s = self.config.hang_case_s() if case_dir in self.hanging else self.per_case_s()
                if self.queued_at.get(case_dir, since - 1.0) >= since and need_s <= left_s:
                    return queue, case_dir
        return None

    def _collect(self, reducer: Reducer) -> None:
        for reply in reducer.replies():
            self._log(reply.get("line") or f"{reply['case']}: reduction failed: {reply.get('error')}")
            self._done(Path(reply["case"]), bool(reply["ok"]), float(reply.get("seconds", 0.0)), reducer.polishing)
            if reply.get("unreproduced") and not reducer.polishing:
                self._mark_unreproduced(Path(reply["case"]), str(reply.get("error", "")))
            if reply["ok"] and not reply.get("polished", True):
                self.polish.append(Path(reply["path"]))
            reducer.case_dir = None
        overran = reducer.case_dir is not None and time.monotonic() - reducer.since > self.config.limit_s()
        if reducer.proc.poll() is not None or overran:
            if reducer.case_dir is not None:
                self._log(f"{reducer.case_dir}: reduction failed: the reducer "
                          + ("overran its budget" if overran else f"exited with status {reducer.proc.returncode}"))
                self._done(reducer.case_dir, False, time.monotonic() - reducer.since, reducer.polishing)
            reducer.stop()
            self.reducers.remove(reducer)

    def _start(self, nice: int) -> Reducer:
        def detach_and_yield() -> None:
            detach_from_terminal_and_parent()
            lower_priority(nice)

        with open(self.log_dir / "reduce.log", "a") as log:
            # The campaign's import path: a registry it loads by reference (a plugin's, a test's) loads there too.
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            # The checking children's crash logs go to the campaign's log folder: a reducer killed with its campaign
            # leaves nothing in the temporary folder.
            command = [*self.config.command(), "--log-dir", str(self.log_dir / REDUCE_CHILD_LOGS)]
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=log, env=env, preexec_fn=detach_and_yield)
        return Reducer(proc)

    def _mark_unreproduced(self, case_dir: Path, why: str) -> None:
        """Mark a case whose own graph did not show its bug alone: its repro.py will not show it either."""
        self.unreproduced += 1
        try:
            atomic_write_text(case_dir / UNREPRODUCED_NOTE,
                              f"{why}\nThe campaign's worker met this bug after other tests; this case's repro.py "
                              "does not show it alone. Kept as found; not a report to file.\n")
        except OSError as exc:
            self._log(f"{case_dir}: cannot mark it as not reproduced alone: {exc}")

    def _log(self, line: str) -> None:
        with open(self.log_dir / "reduce.log", "a") as log:
            log.write(line.rstrip() + "\n")

    def _done(self, case_dir: Path, ok: bool, seconds: float, polishing: bool = False) -> None:
        """Count a case done; one that failed is not tried again on resume (a failed polish keeps its reduced
        case as it was)."""
        if polishing:
            self.polished += ok
        else:
            if case_dir not in self.hanging:  # a hang is reckoned apart (hang_case_s), not in the mean
                self.seconds.append(seconds)
            self.hanging.discard(case_dir)
            self.reduced += ok
            self.failed += not ok
        if ok:
            return
        with open(self.log_dir / FAILED_LIST, "a") as handle:
            handle.write(f"{case_dir.name}\n")

    def drain(self, reducers: int, start_until: float | None = None, stop_at: float | None = None) -> None:
        """Reduce the waiting cases now, with `reducers` processes at the campaign's priority (the tests are over:
        the cores are free); after `start_until` only a case queued since then that fits before `stop_at` starts,
        and any running at `stop_at` (time.monotonic()) waits for a resume."""
        self.reduced_beside = self.reduced
        while self.waiting or self.busy or self.polish:
            now = time.monotonic()
            in_time = start_until is None or now < start_until
            # A case filed after `start_until` was in no reserve: it starts if it fits before `stop_at`.
            late = None if in_time or start_until is None or stop_at is None else (start_until, stop_at)
            self.step(reducers, nice=0, hand_out=in_time or late is not None, late=late)
            starts_late = late is not None and self._next_case(late) is not None
            if (stop_at is not None and now >= stop_at) or not (in_time or self.busy or starts_late):
                break  # the rest waits
            time.sleep(0.2)
        self.close(0)

    def summary(self) -> str:
        """The campaign's closing line on reduction."""
        beside = self.reduced if self.reduced_beside is None else self.reduced_beside
        unreproduced = (f" ({self.unreproduced} of them do not show their bug alone: {UNREPRODUCED_NOTE})"
                        if self.unreproduced else "")
        return (f"reduction: {self.reduced} new cases minimized, {self.failed} failed{unreproduced} "
                f"(see .logs/reduce.log), "
                f"{self.waiting} waiting (minimized on --resume, or by `convsmith reduce CASE`); {beside} of them "
                f"minimized while testing; {self.polished} reduced cases polished, {len(self.polish)} left to polish")

    def close(self, wait_s: float) -> None:
        """Give running cases up to `wait_s` seconds, then stop every reducer; unfinished cases stay for a resume."""
        deadline = time.monotonic() + wait_s
        while self.busy and time.monotonic() < deadline:
            for reducer in list(self.reducers):
                self._collect(reducer)
            time.sleep(0.2)
        for reducer in self.reducers:
            if reducer.case_dir is None:
                reducer.end_input()
        deadline = time.monotonic() + STOP_GRACE_S
        for reducer in self.reducers:
            if reducer.case_dir is not None:  # interrupted, not failed: it waits, and a resume queues it again
                (self.polish if reducer.polishing else self.pending).appendleft(reducer.case_dir)
                reducer.case_dir = None
                reducer.stop()
            else:
                reducer.stop(grace_s=max(0.0, deadline - time.monotonic()))
        self.reducers.clear()
        sweep_once_dead(scratch_root(self.log_dir / REDUCE_CHILD_LOGS), 2.0)  # their checkers die with them
