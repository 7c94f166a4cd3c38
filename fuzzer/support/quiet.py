"""Keeping the libraries' chatter (exporter IR dumps, torch warnings, ONNX Runtime log lines) off the terminal.

The libraries under test print from C++ as well as from Python, so the capture is at the file-descriptor level:
stdout and stderr point at a temporary file while the block runs; the text is handed back to the caller, who
logs it or shows it behind -v. Processes that import those libraries for the whole of their life (a campaign's
fork server) have their output sent to a log file instead (output_to).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# Log levels of the libraries' native logging, set before their first import. TensorFlow's absl notices printed on
# import ("All log messages before absl::InitializeLog()", "Could not find cuda drivers") ignore them: those are
# caught by the file-descriptor capture alone.
QUIET_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR", "GLOG_minloglevel": "2"}


def quiet_environment() -> None:
    """Turn the libraries' native logging down in this process and its children (a user's own setting wins)."""
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


@dataclass
class Captured:
    """What the libraries printed inside the block (filled in when it ends)."""

    text: str = ""


@contextmanager
def library_output() -> Iterator[Captured]:
    """Send file descriptors 1 and 2 to a temporary file for the block; the text is in the Captured after it."""
    captured = Captured()
    with tempfile.TemporaryFile() as sink:
        try:
            with _descriptors_to(os.dup(sink.fileno())):
                yield captured
        finally:
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")


@contextmanager
def output_to(path: Path) -> Iterator[None]:
    """File descriptors 1 and 2 appended to `path` for the block: a process started inside keeps them for its life."""
    with _descriptors_to(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)):
        yield


@contextmanager
def _descriptors_to(target: int) -> Iterator[None]:
    """File descriptors 1 and 2 pointed where `target` points for the block, then restored; `target` is closed at
    once, so no process started inside inherits it."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def quietly(fn: Callable[..., T], log: Callable[[str], None]) -> Callable[..., T]:
    """`fn` with the libraries' output captured at each call and handed to `log` (when there is any)."""

    def logged(*args: Any, **kwargs: Any) -> T:
        captured = Captured()
        try:
            with library_output() as captured:
                return fn(*args, **kwargs)
        finally:
            if captured.text:
                log(captured.text)

    return logged
