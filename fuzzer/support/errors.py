"""Errors a user can cause: the CLI prints their message on one line and exits non-zero."""


class UsageError(Exception):
    """Bad input from the user (a flag, a file, a folder): one clear line, no traceback."""
