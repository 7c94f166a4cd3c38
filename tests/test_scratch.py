"""Temporary files of confined processes stay in a folder per process under the campaign's logs, swept once the
process is dead: a converter's leftovers (AutoGraph's generated files, a killed test's temp folder) never reach the
system temp folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_isolation import FaultyEcho, FaultySegfault, run_campaign

from fuzzer.campaign.spec import LOG_DIR
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.support.scratch import scratch_root, sweep_dead, use_private_tempdir

LEFT_PREFIX = "convsmith-planted-leftover-"


class LeavesTempFiles(FaultyEcho):
    """Passes like faulty-echo after leaving a file in the temp folder, as AutoGraph does; crashes when that
    folder is not its process's own under the campaign's logs."""

    name = "planted-leftover"

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        folder = Path(tempfile.gettempdir())
        if folder.name != str(os.getpid()) or folder.parent.name != "tmp" or folder.parent.parent.name != LOG_DIR:
            raise RuntimeError(f"temp folder {folder} is not this worker's own")
        handle, _ = tempfile.mkstemp(prefix=LEFT_PREFIX)
        os.close(handle)
        return super().convert_impl(source, options)


LEFTOVER_REGISTRY = ConverterRegistry([LeavesTempFiles(), FaultySegfault()])


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_sweep_removes_only_dead_processes_folders(tmp_path: Path) -> None:
    root = scratch_root(tmp_path)
    gone, live = dead_pid(), os.getpid()
    for pid in (gone, live):
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "left.py").write_text("x = 1\n")
    (root / "not-a-pid").mkdir()
    assert sweep_dead(root) == [gone]
    assert sorted(p.name for p in root.iterdir()) == sorted([str(live), "not-a-pid"])


def test_a_zombie_counts_as_dead(tmp_path: Path) -> None:
    # An orphan nobody reaps stays a zombie: a container whose first process never waits keeps it for good.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        (scratch_root(tmp_path) / str(child.pid)).mkdir(parents=True)
        assert sweep_dead(scratch_root(tmp_path)) == [child.pid]
        assert not scratch_root(tmp_path).exists()
    finally:
        child.wait()


def test_a_process_and_its_children_write_temp_files_in_its_own_folder(tmp_path: Path) -> None:
    code = ("import subprocess, sys, tempfile; from fuzzer.support.scratch import use_private_tempdir; "
            f"own = use_private_tempdir({str(tmp_path)!r}); print(own); print(tempfile.mkstemp()[1]); "
            "print(subprocess.run([sys.executable, '-c', 'import tempfile; print(tempfile.mkstemp()[1])'], "
            "capture_output=True, text=True).stdout.strip())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, mine, childs = (Path(line) for line in proc.stdout.split())
    assert own == scratch_root(tmp_path) / own.name and own.name.isdigit()
    assert mine.parent == own and childs.parent == own
    assert sweep_dead(scratch_root(tmp_path)) == [int(own.name)]
    assert not own.exists()


def test_use_private_tempdir_sweeps_the_dead_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # restored after: this process's own setting
    monkeypatch.setenv("TMPDIR", os.environ.get("TMPDIR", tempfile.gettempdir()))
    stale = scratch_root(tmp_path) / str(dead_pid())
    stale.mkdir(parents=True)
    own = use_private_tempdir(tmp_path)
    assert not stale.exists()
    assert Path(tempfile.gettempdir()) == own and os.environ["TMPDIR"] == str(own)


@pytest.mark.slow
def test_a_campaign_leaves_no_temp_files_behind(tmp_path: Path) -> None:
    """Workers that pass, and workers that die mid-test, leave nothing in the system temp folder or the logs."""
    before = set(Path(tempfile.gettempdir()).glob(f"{LEFT_PREFIX}*"))
    db = run_campaign(tmp_path, ("planted-leftover", "faulty-segfault"), 3, "test_scratch:LEFTOVER_REGISTRY",
                      workers=1)
    rows = db.conn.execute("SELECT converter, symptom FROM tests ORDER BY idx, converter").fetchall()
    assert rows == [("faulty-segfault", "process_death"), ("planted-leftover", "pass")] * 3
    assert set(Path(tempfile.gettempdir()).glob(f"{LEFT_PREFIX}*")) == before
    assert not scratch_root(tmp_path / LOG_DIR).exists()  # every folder swept, then the emptied root
