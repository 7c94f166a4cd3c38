"""The Ray engine on a real two-node Ray cluster on the loopback address: a short campaign across both nodes with a
converter that segfaults, one that hangs and one that allocates without bound (test_isolation's planted ones, in the
registry `test_ray_engine:RAY_REGISTRY`), the second node killed mid-unit; every (graph, converter) test is recorded
exactly once with its verdict, and the lost node's unit runs again on the node left.

The kill lands mid-unit by design, not by timing: the second node is started with STALL_ENV naming a file, and the
planted converter that runs second in each unit touches that file and stalls there (it passes at once elsewhere), so
the node holds a unit with its first test recorded when the test kills it. The stall comes before the planted
faults: a worker that dies or is killed hands the rest of its unit back to the campaign, and the first actor ready
runs it, often the one on the other node (where the stall, run last, passed at once in a run of three to five).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_isolation import FaultyAlloc, FaultyEcho, FaultyHang, FaultySegfault

from fuzzer.campaign.assignment import Assignment
from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import Campaign
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.scheduler import Unit
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.commands import fuzz
from fuzzer.commands.main import main
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="the Ray engine's tests need Ray: make install RAY=1")

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
RAY = str(Path(sys.executable).parent / "ray")
# A node whose raylet is gone is declared dead after about 5 s, not the default 15 s or more; not faster, since a
# node whose raylet is only starved of CPU by the other test process (2 cores) must not be declared dead.
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "5",
               "RAY_health_check_initial_delay_ms": "0", "RAY_health_check_timeout_ms": "1000"}
STALL_ENV = "CONVSMITH_STALL_MARK"
TIMEOUT_S = 6
STALL_S = 5.0  # under the campaign's timeout (the stall is no hang), and long enough to see it on a busy box


class PlantedStallOnMarkedNode(FaultyEcho):
    """Passes like faulty-echo; on a node started with STALL_ENV it first touches that file and stalls."""

    name = "planted-stall"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        mark = stall_mark()
        if mark:
            Path(mark).touch()
            time.sleep(STALL_S)
        return super().convert_impl(source, options)


RAY_REGISTRY = ConverterRegistry([FaultySegfault(), FaultyHang(), FaultyAlloc(), FaultyEcho(),
                                  PlantedStallOnMarkedNode()])
# In this order in each unit: the stall second, after a test that keeps the worker and before those that end it.
VERDICTS = {"faulty-echo": "pass", "planted-stall": "pass", "faulty-segfault": "process_death", "faulty-hang": "hang",
            "faulty-alloc": "out_of_memory"}
BEFORE_STALL = ["faulty-echo"]
UNITS = 6


@dataclass(frozen=True)
class Cluster:
    """A head and a second node, each started in its own process group (so that one can be killed alone)."""

    address: str
    head_group: int
    node_group: int
    env: dict[str, str]  # what a driver needs to join: the cluster's token
    stall_mark: Path  # touched by planted-stall on the second node


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ray_start(args: list[str], env: dict[str, str]) -> int:
    """Run `ray start` in a new session; its daemons stay in that process group, whose id is returned."""
    proc = subprocess.Popen([RAY, "start", "--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
                             *args], env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    return proc.pid


def kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _environ_mark(pid: int) -> str | None:
    """STALL_ENV as process `pid` was started with; None without it, or when it is gone."""
    try:
        entries = (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{STALL_ENV}=".encode()
    return next((e[len(prefix):].decode() for e in entries if e.startswith(prefix)), None)


def _parent(pid: int) -> int:
    try:
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def stall_mark(pid: int | None = None) -> str | None:
    """STALL_ENV of this process or of the nearest ancestor started with it (the second node's raylet): what
    kill_marked_node reads of every process, so that the actor and its workers are found by their ancestry."""
    pid = os.getpid() if pid is None else pid
    while pid > 1:
        mark = _environ_mark(pid)
        if mark:
            return mark
        pid = _parent(pid)
    return None


def kill_marked_node(group: int) -> None:
    """Kill the second node at once: its process group and every process of it or under it (Ray starts the actor in
    a process group of its own, and an actor outliving its raylet for a second goes on to finish its unit)."""
    kill_group(group)
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and stall_mark(int(proc.name)):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except OSError:  # gone meanwhile, or not ours
                pass


def test_the_engine_flags_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "campaign"
    assert main(["fuzz", "--address", "127.0.0.1:6379", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "convsmith fuzz: --address is the Ray cluster of --engine ray"
    monkeypatch.setattr(fuzz.importlib.util, "find_spec", lambda name: None)  # a machine without Ray
    assert main(["fuzz", "--engine", "ray", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == ("convsmith fuzz: --engine ray needs Ray: make install RAY=1 (or pip "
                                               "install '.[ray]')")
    assert not out.exists()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    temp = tempfile.mkdtemp(prefix="cs-ray-")  # short: Ray's socket paths must fit in 107 bytes
    # Ray's token authentication, with a token of this cluster's own (not the one in ~/.ray a local Ray makes).
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env = dict(os.environ, **FAST_HEALTH, **auth)
    port = free_port()
    groups: list[int] = []
    try:
        groups.append(ray_start(["--head", f"--port={port}", f"--temp-dir={temp}", "--include-dashboard=false"],
                                env))
        mark = Path(temp) / "stalled"
        groups.append(ray_start([f"--address=127.0.0.1:{port}"], dict(env, **{STALL_ENV: str(mark)})))
        yield Cluster(f"127.0.0.1:{port}", groups[0], groups[1], auth, mark)
    finally:
        for group in reversed(groups):
            kill_group(group)
        shutil.rmtree(temp, ignore_errors=True)  # Ray's session logs, 300 KB a run


def marked_processes(group: int) -> str:
    """The processes of the second node's process group and whether each was started with STALL_ENV: evidence for
    a run in which none of its workers stalled."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.getpgid(int(proc.name)) == group:
                name = (proc / "comm").read_text().strip()
                found.append(f"{name} {proc.name}: {'yes' if _environ_mark(int(proc.name)) else 'no'}")
        except OSError:
            pass
    return ", ".join(sorted(found)) or "none left"


def verdicts(out: Path) -> list[tuple[int, str, str]]:
    """(graph, converter, symptom) of every test the campaign in `out` recorded so far."""
    if not (out / DB_NAME).exists():
        return []
    conn = sqlite3.connect(f"file:{out / DB_NAME}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT idx, converter, symptom FROM tests ORDER BY idx, converter").fetchall()
    except sqlite3.OperationalError:  # tables not made yet
        return []
    finally:
        conn.close()


def recorded(out: Path) -> dict[int, list[str]]:
    """The converters recorded so far for each graph of the campaign in `out`."""
    done: dict[int, list[str]] = {}
    for idx, converter, _ in verdicts(out):
        done.setdefault(idx, []).append(converter)
    return done


def stalled_unit(out: Path, deadline: float) -> dict[int, list[str]]:
    """What is recorded once the stalled unit's tests before the stall are (the same graph on two reads 0.3 s
    apart: a unit on the other node passes its stall at once), or at `deadline`."""
    last: set[int] = set()
    while True:
        done = recorded(out)
        waiting = {idx for idx, converters in done.items() if converters == BEFORE_STALL}
        if waiting & last or time.monotonic() > deadline:
            return done
        last = waiting
        time.sleep(0.3)


@needs_ray
@pytest.mark.slow
def test_a_campaign_across_two_nodes_survives_a_lost_node(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}", **cluster.env)
    cmd = [sys.executable, "-m", "fuzzer", "fuzz", "--engine", "ray", "--address", cluster.address, "--workers", "2",
           "--registry", "test_ray_engine:RAY_REGISTRY", "--converters", ",".join(VERDICTS), "--tests",
           str(UNITS), "--seed", "100", "--source", "graphs", "--nodes", "3", "--min-nodes", "2", "--timeout",
           f"{TIMEOUT_S}s", "--memory-mb", "256", "--no-reduce", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not cluster.stall_mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not cluster.stall_mark.exists():
            if proc.poll() is None:
                proc.kill()
            log = out / LOG_DIR / "ray_engine.log"  # ENGINE_LOG: ray_engine imports Ray only once needed
            tail = log.read_text()[-3000:] if log.exists() else "no engine log"
            pytest.fail(f"no unit stalled on the second node (campaign exit {proc.wait()}; its processes started "
                        f"with {STALL_ENV}: {marked_processes(cluster.node_group)}):\n{proc.stdout.read()[-3000:]}\n"
                        f"{tail}")
        before = stalled_unit(out, time.monotonic() + STALL_S - 1)
        kill_marked_node(cluster.node_group)  # mid-unit: the second node's raylet, actor and worker
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-4000:]
    rows = verdicts(out)
    # Each (graph, converter) once, none missing, each with its converter's verdict.
    assert rows == [(i, c, VERDICTS[c]) for i in range(UNITS) for c in sorted(VERDICTS)]
    conn = sqlite3.connect(out / DB_NAME)
    assert conn.execute("SELECT COUNT(*) FROM units WHERE done = 1").fetchone()[0] == UNITS
    from fuzzer.campaign.ray_engine import ENGINE_LOG  # Ray is there: the test would have skipped

    log = (out / LOG_DIR / ENGINE_LOG).read_text()
    started = [line for line in log.splitlines() if "actor started" in line]
    lost = [line for line in log.splitlines() if "lost" in line]
    assert len(started) >= 2 and len(lost) == 1, log
    assert "rescheduled" in lost[0] and "units []" not in lost[0], log
    # The lost node's unit had its test before the stall recorded, and kept it (each is in `rows` once).
    rescheduled = int(lost[0].split("units [")[1].split("]")[0].split(",")[0])
    assert before.get(rescheduled) == BEFORE_STALL, (before, log)
    # What keeps a test from being recorded twice, had a lost node's result come late: the campaign takes a result
    # only while its unit still waits for it, and the database's key is (graph, converter).
    work = Assignment()
    work.begin(Unit(rescheduled, 100 + rescheduled, ["planted-stall"]))
    work.complete("planted-stall")
    assert not work.takes("faulty-echo") and not work.takes("planted-stall")
    db = CampaignDB(out / DB_NAME)
    with pytest.raises(sqlite3.IntegrityError):
        db.record_test(TestResult.own_error(rescheduled, 100 + rescheduled, "faulty-echo"), 1, False)
    assert db.conn.execute("SELECT COUNT(*) FROM tests").fetchone()[0] == len(rows)


@needs_ray
@pytest.mark.slow
def test_an_actors_worker_is_recycled_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker due for recycling is replaced inside its actor by one that starts afresh (no tests counted, no
    demotions taken as told), so the campaign goes on: one converter, a new worker every second unit."""
    import fuzzer.campaign.ray_engine as engine
    import fuzzer.campaign.supervisor as supervision

    monkeypatch.setattr(supervision, "RECYCLE_AFTER_TESTS", 2)  # the engines share due_for_recycling
    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR),
                          registry="test_isolation:QUICK_REGISTRY", min_nodes=2, nodes=3, timeout_s=5.0,
                          check={"input_budget_s": 0.2}, prepare_ahead=False)
    spec = CampaignSpec(100, ("faulty-echo",), worker, 6)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1, engine="ray").run() == "finished"  # a Ray instance of its own
    assert db.conn.execute("SELECT COUNT(*), COUNT(DISTINCT idx) FROM tests").fetchone() == (6, 6)
    log = (tmp_path / LOG_DIR / engine.ENGINE_LOG).read_text()
    assert log.count("recycled") >= 2, log
