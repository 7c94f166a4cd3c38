"""A confined process's temporary files in a folder of its own under the campaign's logs, swept once it is dead.

Converters leave files in the system temp folder that nothing removes: TensorFlow's AutoGraph writes every function
it converts (onnx2tf's Keras layers) as `__autograph_generated_file*.py` and keeps it, and a worker killed mid-test
leaves its open TemporaryDirectory behind. Over a days-long campaign that fills /tmp; here it stays inside one
folder per live process and goes when the process does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

SCRATCH = "tmp"  # under a log folder: one folder per process id


def scratch_root(log_dir: str | Path) -> Path:
    """The folder that holds the per-process temp folders of the processes writing to `log_dir`."""
    return Path(log_dir) / SCRATCH


def alive(pid: int) -> bool:
    """Whether `pid` is a running process; a zombie is not (it holds no files, and a container's first process
    may never reap the orphans it inherits)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process now holds that id
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (not Linux), or it went just now
        return False
    return stat[stat.rfind(")") + 2:].startswith("Z")


def sweep_dead(root: Path) -> list[int]:
    """Remove the temp folders of processes that are gone, and `root` once it is empty; returns their ids."""
    swept = []
    for folder in root.glob("[0-9]*"):
        if folder.name.isdigit() and not alive(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)
            swept.append(int(folder.name))
    try:
        root.rmdir()
    except OSError:  # not empty (a live process's folder), or not there
        pass
    return sorted(swept)


def use_private_tempdir(log_dir: str | Path) -> Path:
    """Sweep the dead processes' temp folders, then send this process's temporary files (and its children's, by
    TMPDIR) to a folder of its own; returns it."""
    root = scratch_root(log_dir)
    sweep_dead(root)
    own = root / str(os.getpid())
    own.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(own)
    os.environ["TMPDIR"] = str(own)
    return own


def sweep_once_dead(root: Path, wait_s: float) -> None:
    """Sweep `root` until it is gone or `wait_s` has passed: processes killed with their parent die a moment later."""
    deadline = time.monotonic() + wait_s
    while True:
        sweep_dead(root)
        if not root.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.05)
