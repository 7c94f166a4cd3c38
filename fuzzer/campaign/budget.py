"""A session's time budget: when testing stops, how long units in flight and reductions may go on, when it ends.

The budget counts from the process's start, so the user's `--time 3m` includes start-up and warm start. Reduction
runs beside the tests all along, so the reserve kept back at the end is only for the cases really waiting, and it
is capped: a campaign tests for most of its budget even when it finds bugs faster than they reduce (the rest are
reduced on `--resume`). A reduction running at the deadline may finish within OVERRUN_S of it; none starts after,
but for a case filed in the units' grace whose expected time fits before then.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# At most this share of the budget (and MAX_RESERVE_S) is kept back from the tests for the last reductions: a
# 3-minute campaign keeps 12 s, an hour 4 minutes. Uncapped, the reserve followed the waiting cases, and a campaign
# that found bugs faster than they reduce spent much of its budget reducing instead of testing (docs/campaign.md).
RESERVE_SHARE = 1 / 15
MAX_RESERVE_S = 600.0
UNIT_GRACE_S = 30.0  # units in flight when testing stops get this long (their timeout, if shorter) to finish
# A reduction running at the deadline may finish this long after it (half of the median case took 13 s here), and
# then the campaign ends: within a minute of its budget, triage included.
OVERRUN_S = 30.0


@dataclass(frozen=True)
class Budget:
    """`seconds` of budget from `start` (time.monotonic())."""

    start: float
    seconds: float

    @property
    def deadline(self) -> float:
        return self.start + self.seconds

    @property
    def end(self) -> float:
        """No reduction runs past this: what is left waits for a resume."""
        return self.deadline + OVERRUN_S

    def reserve_s(self, wanted_s: float) -> float:
        """The time kept back from the tests for reductions that want `wanted_s`: at most the cap."""
        return min(wanted_s, RESERVE_SHARE * self.seconds, MAX_RESERVE_S)

    def stop_testing(self, now: float, wanted_reserve_s: float) -> bool:
        """Whether testing stops now: the deadline, less the reserve, has come."""
        return now + self.reserve_s(wanted_reserve_s) >= self.deadline

    def grace_end(self, now: float, timeout_s: float) -> float:
        """Until when the units in flight when testing stops (at `now`) may finish; later they stay for a resume."""
        return min(now + min(timeout_s, UNIT_GRACE_S), self.end)

    def may_start_reduction(self, now: float) -> bool:
        return now < self.deadline


def process_started() -> float:
    """When this process started, on time.monotonic()'s clock (Linux: /proc); now where that cannot be read."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            # Field 22 (starttime, in clock ticks since boot) follows the command name, which may hold spaces.
            started = int(stat.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
            age = float(uptime.read().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return now
    return now - max(age, 0.0)


def format_budget(budget: Budget, tests_started: float | None, tests_stopped: float | None, ended: float) -> str:
    """One line: how much of the budget went to testing, and when the campaign ended against it."""
    start_up = "" if tests_started is None else f" (start-up {tests_started - budget.start:.0f} s)"
    tested = 0.0 if tests_started is None or tests_stopped is None else tests_stopped - tests_started
    late = ended - budget.deadline
    when = f"{late:.0f} s after it" if late >= 0 else f"{-late:.0f} s before it"
    return f"time: tested for {tested:.0f} s of the {budget.seconds:.0f} s budget{start_up}; ended {when}"
