"""Replaying a case folder as a maintainer would: its repro.py run by a fresh Python process, without convsmith on the
path, and the outcome kept in case.json ("replay"). That record is the only thing that says a case reproduces: a
check in a long-lived process (a campaign's worker, the reducer's checker) may see a bug its repro.py never shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer.cases.case_json import CASE_JSON, REPLAY_KEY, load_case_json
from fuzzer.support.errors import Exit
from fuzzer.support.files import atomic_write_text
from oracles.paths import portable

REPRO_PY = "repro.py"
# A reduced graph's repro.py imports its libraries and converts in seconds; a hang case's waits out its own timeout
# and so runs past this, recording no outcome (unknown) rather than holding the reducer past its limit.
REPLAY_TIMEOUT_S = 45.0


@dataclass(frozen=True)
class FreshReplay:
    """One run of a case's repro.py in a fresh process: its exit status (None: it ran past the timeout)."""

    exit_status: int | None
    seconds: float
    detail: str = ""  # what it observed: its first bad output, its "observed:" line, or its last line

    @property
    def reproduces(self) -> bool | None:
        """True when repro.py showed the case's own failure (exit 1); False when the bug is gone (0) or it fails
        otherwise (4); None when it could not tell (it timed out, a library or a file is missing)."""
        if self.exit_status == Exit.BUG:
            return True
        return False if self.exit_status in (Exit.OK, Exit.DIFFERENT) else None

    def to_json(self) -> dict[str, Any]:
        return {"command": f"python {REPRO_PY}", "exit_status": self.exit_status, "reproduces": self.reproduces,
                "seconds": round(self.seconds, 1), "detail": self.detail}


def replay_repro(folder: Path, timeout_s: float = REPLAY_TIMEOUT_S) -> FreshReplay:
    """Run the folder's repro.py in a fresh process, as its reader would: this Python, no PYTHONPATH."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, REPRO_PY], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return FreshReplay(None, time.monotonic() - start, f"{REPRO_PY} ran past {timeout_s:g} s")
    return FreshReplay(done.returncode, time.monotonic() - start, repro_detail(done.stdout, done.stderr))


def record_replay(folder: Path, replay: FreshReplay) -> None:
    """Keep `replay` in the folder's case.json (the rest of it as it was), atomically."""
    data = load_case_json(folder)
    data[REPLAY_KEY] = replay.to_json()
    atomic_write_text(folder / CASE_JSON, portable(json.dumps(data, indent=1)) + "\n")


def replay_and_record(folder: Path, timeout_s: float = REPLAY_TIMEOUT_S) -> FreshReplay:
    """Replay the folder's repro.py in a fresh process and record the outcome in its case.json."""
    replay = replay_repro(folder, timeout_s)
    record_replay(folder, replay)
    return replay


__all__ = ["FreshReplay", "record_replay", "replay_and_record", "replay_repro"]


def last_line(text: str, width: int = 200) -> str:
    """The last non-blank line of a process's output, cut to `width` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:width] if lines else ""


def repro_detail(stdout: str, stderr: str) -> str:
    """What repro.py observed: its first out-of-tolerance output ("BAD ..."), else its "observed: " line, else its
    last line of output."""
    lines = [line.strip() for line in stdout.splitlines()]
    picked = [line for line in lines if line.startswith("BAD ")][:1] or [
        line.removeprefix("observed: ") for line in lines if line.startswith("observed: ")][-1:]
    return picked[0][:200] if picked else last_line(stderr) or last_line(stdout)
