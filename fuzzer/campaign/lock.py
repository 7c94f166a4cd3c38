"""One campaign at a time in a campaign folder: an advisory lock held for the campaign's life.

Two campaigns writing one folder would run the same units twice and race on its case folders; and the lock is what
makes it safe for a starting campaign to clear what a killed one left half-written (support.files).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fuzzer.campaign.db import campaign_db_path
from fuzzer.support.errors import UsageError

LOCK_NAME = ".campaign.lock"


@contextmanager
def campaign_lock(out_dir: Path) -> Iterator[None]:
    """Hold the lock of the campaign in `out_dir` until the block ends; a UsageError when the folder holds no
    campaign, or when another process holds its lock (named by its pid).

    flock is released by the kernel when its holder dies, however it dies, so a killed campaign never leaves the
    folder locked."""
    fd = os.open(campaign_db_path(out_dir).with_name(LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            holder = f" (pid {pid})" if pid else ""
            raise UsageError(f"{out_dir}: a campaign is already running in this folder{holder}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)
