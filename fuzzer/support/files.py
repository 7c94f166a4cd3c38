"""Atomic file and folder writes: a reader never sees half a file, a crash never leaves one.

Temp-file helpers make private files (0600) and folders (0700); what is published gets the modes any other
output gets under the user's umask, so teammates on a shared box can read a campaign.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once: os.umask can only be read by setting it


def make_shared(path: Path) -> None:
    """Give a folder made by mkdtemp (or a file made by mkstemp) the mode a plain mkdir (open) would give it."""
    os.chmod(path, (0o777 if Path(path).is_dir() else 0o666) & ~_UMASK)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to a temp file beside `path`, fsync it, then rename it over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_publish_dir(staging: Path, final: Path) -> bool:
    """Rename a fully written staging folder to `final`; False (and staging removed) when `final` exists."""
    try:
        os.rename(staging, final)
        return True
    except OSError:
        if final.exists():
            shutil.rmtree(staging, ignore_errors=True)
            return False
        raise


STAGING_PREFIX = ".tmp-"  # a folder being written: mkdtemp(prefix=".tmp-<name>-") beside its final place
SWAPPED_PREFIX = ".old-"  # a folder being replaced: moved_aside(final, staging) until its successor is in
_TAG = 8  # characters of the staging folder's random suffix that tag the folder it replaces


def moved_aside(final: Path, staging: Path) -> Path:
    """Where `final` waits while `staging` replaces it: ".old-<name>-<staging's tag>" beside it."""
    return final.with_name(f"{SWAPPED_PREFIX}{final.name}-{staging.name[-_TAG:]}")


def _original(aside: Path) -> Path | None:
    """The folder a moved_aside path stands for; None for a name moved_aside does not make."""
    name = aside.name
    if not name.startswith(SWAPPED_PREFIX) or len(name) <= len(SWAPPED_PREFIX) + _TAG + 1:
        return None
    return aside.with_name(name[len(SWAPPED_PREFIX):-(_TAG + 1)])


def recover_interrupted_writes(folder: Path) -> list[str]:
    """Undo what a process killed mid-write left in `folder`: a replaced folder whose successor never arrived is
    put back, and staging folders, superseded folders and temp files are removed. Returns what it put back.

    Call it only while no other process writes into `folder` (a campaign does under its lock)."""
    restored = []
    for entry in sorted(Path(folder).iterdir()):
        name, original = entry.name, _original(entry)
        if original is not None and entry.is_dir():
            if original.exists():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                os.rename(entry, original)
                restored.append(original.name)
        elif name.startswith(STAGING_PREFIX) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif name.startswith(".") and name.endswith(".tmp") and entry.is_file():
            entry.unlink(missing_ok=True)
    return restored
