"""Errors a user can cause, and the exit statuses every command (and every repro.py) shares."""

import enum


class Exit(enum.IntEnum):
    """The one exit-status rule of convsmith, its commands and the repro.py scripts it writes."""

    OK = 0  # nothing wrong
    BUG = 1  # a bug shows (check finds one, repro reproduces one)
    USAGE = 2  # bad usage or input: a flag, a file, a folder
    CANNOT_RUN = 3  # could not run here: a missing optional dependency, converter library or device
    DIFFERENT = 4  # a case replayed fails, but not with the root cause it was filed for


class UsageError(Exception):
    """Bad input from the user (a flag, a file, a folder): one clear line, exit 2, no traceback."""


class CannotRun(Exception):
    """This machine cannot do what was asked (a converter's library or a device is missing): one line, exit 3."""
