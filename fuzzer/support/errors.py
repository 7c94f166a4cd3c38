"""Errors a user can cause, and the exit statuses every command (and every repro.py) shares."""

import enum


class Exit(enum.IntEnum):
    """The one exit-status rule of convsmith, its commands and the repro.py scripts it writes."""

    OK = 0  # nothing wrong
    BUG = 1  # a bug shows (check finds one, repro reproduces one)
    USAGE = 2  # bad usage or input: a flag, a file, a folder
    CANNOT_RUN = 3  # could not run here: a missing optional dependency, converter library or device; a full disk
    DIFFERENT = 4  # a case replayed fails, but not with the root cause it was filed for


class UsageError(Exception):
    """Bad input from the user (a flag, a file, a folder): one clear line, exit 2, no traceback."""


class CannotRun(Exception):
    """This machine cannot do what was asked (a converter's library or a device is missing): one line, exit 3."""


class DiskFull(Exception):
    """No space left where the campaign writes (a case folder, the database): the campaign stops, keeping what it
    recorded, and resumes once there is space again."""


# OSError numbers of a full device or a spent quota; sqlite says so in words.
_FULL_ERRNOS = frozenset({28, 122})  # ENOSPC, EDQUOT
_SQLITE_FULL = "database or disk is full"


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it was raised from) says the device is full."""
    while exc is not None:
        if isinstance(exc, DiskFull) or (isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS) \
                or _SQLITE_FULL in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False
