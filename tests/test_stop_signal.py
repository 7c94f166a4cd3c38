"""`kill PID` stops a campaign as Ctrl-C does: the session and the demotion tally are recorded, the workers go with
it, and `--resume` goes on where it stopped. The converters are test_isolation's planted quick ones."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzzer.campaign.db import DB_NAME
from fuzzer.campaign.policy.novelty import NOVELTY_META

ROOT = Path(__file__).resolve().parents[1]


def _tests(out: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{out / DB_NAME}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:  # not made yet
        return 0


def _children(pid: int) -> set[int]:
    """Every process below `pid`."""
    found: set[int] = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found |= {int(proc.name)} | _children(int(proc.name))
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _command(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "gone"


@pytest.mark.slow
def test_sigterm_stops_the_campaign_cleanly_and_it_resumes(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    campaign = [sys.executable, "-m", "fuzzer", "fuzz", "--registry", "test_isolation:QUICK_REGISTRY",
                "--converters", "faulty-crash,faulty-echo", "--workers", "2", "--nodes", "3", "--no-reduce"]
    proc = subprocess.Popen([*campaign, "--time", "5m", "--out", str(out)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _tests(out) < 10 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        below = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout[-2000:]
    assert f"campaign interrupted: {out} (continue with --resume {out})" in stdout
    conn = sqlite3.connect(out / DB_NAME)
    assert conn.execute("SELECT status FROM sessions").fetchall() == [("interrupted",)]
    assert conn.execute("SELECT COUNT(*) FROM meta WHERE key = ?", (NOVELTY_META,)).fetchone()[0] == 1
    conn.close()
    deadline = time.monotonic() + 10  # a process's own exit once its campaign is gone (the fork server's EOF)
    while [pid for pid in below if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [_command(pid) for pid in below if _alive(pid)] == []
    before = _tests(out)
    resumed = subprocess.run([*campaign[:4], "--resume", str(out), "--time", "40s"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _tests(out) > before
