"""The campaign: SIGKILL and resume without repeats or damage; one case folder per signature; bad inputs exit."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_isolation import FaultyCrash, FaultyEcho

from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.lock import campaign_lock
from fuzzer.campaign.spec import CampaignSpec, case_folders
from fuzzer.cases.folder import read_case
from fuzzer.commands.main import main
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions
from generators.generator import generate

TESTS = Path(__file__).parent
ROOT = TESTS.parent
N = 16  # graphs in the killed campaign


GATE_AFTER = 6  # echo tests run before the rest wait at the gate


class GatedEcho(FaultyEcho):
    """faulty-echo that, once $CONVSMITH_RUN_LOG holds GATE_AFTER graphs, waits for the file $CONVSMITH_GATE before
    it runs: the campaign stops mid-way, at a point that does not depend on the machine's speed, and is killed there.
    Without $CONVSMITH_GATE (the resumed campaign) it is faulty-echo."""

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        gate, log = os.environ.get("CONVSMITH_GATE"), Path(os.environ.get("CONVSMITH_RUN_LOG", "/nonexistent"))
        if gate and log.exists() and len(log.read_text().splitlines()) >= GATE_AFTER:
            while not os.path.exists(gate):
                time.sleep(0.05)
        return super().convert_impl(source, options)


GATED_REGISTRY = ConverterRegistry([FaultyCrash(), GatedEcho()])


def _fuzz(out: Path, *extra: str, log: Path, gate: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}", CONVSMITH_RUN_LOG=str(log))
    env.pop("CONVSMITH_GATE", None)
    if gate is not None:
        env["CONVSMITH_GATE"] = str(gate)
    cmd = [sys.executable, "-m", "fuzzer", "fuzz", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _rows(out: Path) -> list[tuple[int, str]]:
    if not (out / DB_NAME).exists():
        return []
    conn = sqlite3.connect(f"file:{out / DB_NAME}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT seed, converter FROM tests").fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        return []
    finally:
        conn.close()


def _kill_gated(gate: Path) -> None:
    """SIGKILL the processes still waiting at `gate`: the killed campaign's workers and their fork server, which
    the kill leaves behind blocked there (they would wait for the gate for ever)."""
    mark = f"CONVSMITH_GATE={gate}".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                os.kill(int(environ.parent.name), signal.SIGKILL)
        except (OSError, ValueError):  # gone meanwhile, or not ours to read
            continue


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """A gate file that is never opened; whatever still waits at it when the test ends is killed."""
    path = tmp_path / "never-opened"
    yield path
    _kill_gated(path)


@pytest.mark.slow
def test_sigkill_then_resume_keeps_everything_and_repeats_nothing(tmp_path: Path, gate: Path) -> None:
    out, log = tmp_path / "camp", tmp_path / "runs.log"
    # Graph units only: the counts below are per generated graph (the default mix would test a zoo model on some).
    flags = ["--registry", "test_campaign:GATED_REGISTRY", "--nodes", "3", "--min-nodes", "2", "--source", "graphs"]
    proc = _fuzz(out, "--out", str(out), "--tests", str(N), "--workers", "2", "--seed", "7", *flags, log=log,
                 gate=gate)
    # Killed once it has committed tests and its echo tests wait at the gate (a bound on the wait only: a campaign
    # that gets nowhere in it fails below).
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None and not (
            len(_rows(out)) >= 4 and log.exists() and len(log.read_text().splitlines()) >= GATE_AFTER):
        time.sleep(0.1)
    assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""  # still running: the kill interrupts it
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = set(_rows(out))
    assert 4 <= len(committed) < 2 * N  # the echo tests behind the gate never ran
    runs_before = log.read_text().splitlines() if log.exists() else []
    # Whatever the kill interrupted, the resume finds it undone: a staged case and a case moved aside to be replaced.
    (out / ".tmp-crash-staged-abcd1234").mkdir()
    aside = next(iter(case_folders(out)), None)
    if aside is not None:
        aside.rename(out / f".old-{aside.name}-abcd1234")
    resumed = _fuzz(out, "--resume", str(out), log=log)
    text, _ = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, text

    conn = sqlite3.connect(out / DB_NAME)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = conn.execute("SELECT seed, converter FROM tests").fetchall()
    assert sorted(rows) == sorted((7 + i, c) for i in range(N) for c in ("faulty-crash", "faulty-echo"))
    assert conn.execute("SELECT COUNT(*) FROM units WHERE done = 1").fetchone() == (N,)
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone() == (2,)
    # No committed test ran again: the echo converter logs each graph it runs; graphs after the kill are
    # exactly those of tests not committed before it.
    spec = CampaignSpec.from_json(__import__("json").loads(
        conn.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()[0]), out)
    graph_of = {seed: generate(seed, spec.worker.gen_options(seed)).dumps().replace("\n", "")
                for seed in range(7, 7 + N)}
    after = log.read_text().splitlines()[len(runs_before):]
    done_echo = [s for s, c in committed if c == "faulty-echo"]
    unique = {g for g in graph_of.values() if list(graph_of.values()).count(g) == 1}
    assert not {graph_of[s] for s in done_echo} & unique & set(after)
    rerun = conn.execute("SELECT COUNT(*) FROM tests WHERE converter = 'faulty-echo' AND session = 2 "
                         "AND stage != 'source'").fetchone()[0]  # a failing source never reaches the converter
    assert len(after) == rerun
    # Every case folder reads back intact; one folder per distinct signature; no staging left over.
    signatures = {r[0] for r in conn.execute("SELECT signature FROM bugs")}
    folders = case_folders(out)
    assert sorted(f.name for f in folders) == sorted(signatures)
    assert all(read_case(f).signature == f.name for f in folders)
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]
    assert conn.execute("SELECT SUM(count) FROM bugs").fetchone() == \
        conn.execute("SELECT COUNT(*) FROM tests WHERE is_bug = 1").fetchone()


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str, status: int = 2) -> None:
    assert main(argv) == status
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bad_resume_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["fuzz", "--resume", str(tmp_path / "missing")], "no such campaign folder")
    _one_line_error(capsys, ["fuzz", "--resume", str(tmp_path)], "not a campaign folder")
    (tmp_path / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    _one_line_error(capsys, ["fuzz", "--resume", str(tmp_path)], "not a readable campaign database")
    _one_line_error(capsys, ["status", str(tmp_path / "missing")], "no such campaign folder")


def test_a_second_campaign_in_a_running_campaigns_folder_is_one_line(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    CampaignDB(tmp_path / DB_NAME, create=True).close()
    with campaign_lock(tmp_path):
        _one_line_error(capsys, ["fuzz", "--resume", str(tmp_path)],
                        f"a campaign is already running in this folder (pid {os.getpid()})")
    with campaign_lock(tmp_path):  # released with its holder
        pass


def test_unknown_converter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["fuzz", "--converters", "no-such-thing", "--out", str(tmp_path / "c")],
                    "unknown converter(s): no-such-thing")
    assert not (tmp_path / "c").exists()


def test_unwritable_output_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    _one_line_error(capsys, ["fuzz", "--out", str(tmp_path / "file" / "sub"), "--tests", "1"],
                    "cannot write to the output folder")


def test_existing_campaign_needs_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sqlite3.connect(tmp_path / DB_NAME).close()
    _one_line_error(capsys, ["fuzz", "--out", str(tmp_path), "--tests", "1"], "--resume")


def test_cuda_without_gpu_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    _one_line_error(capsys, ["fuzz", "--device", "cuda", "--out", str(tmp_path / "c")], "--device cuda", status=3)
