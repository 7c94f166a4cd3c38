"""Confining a child process that runs converters: no Ctrl-C, death with its parent, one thread, an address-space
limit, a bounded recursion limit, its output in a log, its temporary files in a folder of its own
(fuzzer/support/scratch.py) and its fatal signals and hangs in a faulthandler file (campaign workers and the
reducer's checker share this)."""

from __future__ import annotations

import ctypes
import faulthandler
import os
import resource
import signal
import sys
from pathlib import Path
from typing import IO

from fuzzer.support.faults import STACK_DUMP_SIGNAL, fault_file, log_file
from fuzzer.support.scratch import use_private_tempdir
from generators.solver import keep_freed_memory

_PR_SET_PDEATHSIG = 1
DEFAULT_MEMORY_MB = 4096  # what a worker or a reducer's child may grow to before it counts as out of memory
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# Python's recursion limit where converters run: far deeper than any graph here needs (the default is 1000, torch's
# inductor asks for 2000), and shallow enough for CPython 3.11's C stack at 8 MiB. onnx2tf sets 2**31 - 1 on import:
# unbounded, an endless recursion took the process's whole address space and ended as MemoryError (filed as out of
# memory) or CPython's "SystemError: error return without exception set", never as the RecursionError it is.
RECURSION_LIMIT = 20_000


def detach_from_terminal_and_parent() -> None:
    """Ignore Ctrl-C (the parent decides when children stop) and die with the parent, even on SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the pipe's EOF still ends the loop
        pass


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def address_space_limit(memory_mb: int, device: str, vm_size: int) -> int | None:
    """RLIMIT_AS for a child: its size now plus its memory budget; none on a GPU, where the CUDA runtime maps
    far more address space than it uses (the parent's resident-memory watchdog still applies)."""
    if memory_mb <= 0 or device != "cpu":
        return None
    return vm_size + memory_mb * 2**20


def bound_recursion(limit: int = RECURSION_LIMIT) -> None:
    """Set Python's recursion limit to `limit`, and keep it there: a library that raises it later (on its first
    import, which may come after this) gets at most `limit`, so every process that checks a graph recurses alike."""
    if getattr(sys.setrecursionlimit, "bounded_at", None) != limit:
        unbounded = getattr(sys.setrecursionlimit, "unbounded", sys.setrecursionlimit)

        def bounded(depth: int) -> None:
            unbounded(min(depth, limit))

        bounded.bounded_at, bounded.unbounded = limit, unbounded  # type: ignore[attr-defined]
        sys.setrecursionlimit = bounded
    sys.setrecursionlimit(limit)


def confine(memory_mb: int, device: str, log_dir: str | Path) -> IO[str]:
    """Set this process up to run converters (see the module doc); returns the open fault file."""
    detach_from_terminal_and_parent()
    bound_recursion()
    keep_freed_memory()  # the feeder, forked later, inherits it
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set in this process
        pass
    limit = address_space_limit(memory_mb, device, _vm_size_bytes())
    if limit is not None:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    use_private_tempdir(log_dir)
    log = os.open(log_file(log_dir, os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    fault = open(fault_file(log_dir, os.getpid()), "w")  # noqa: SIM115 - lives as long as the process
    faulthandler.enable(fault, all_threads=False)
    faulthandler.register(STACK_DUMP_SIGNAL, file=fault, all_threads=True)  # a hang's tracebacks, on request
    return fault


def lower_priority(niceness: int) -> bool:
    """Raise this process's niceness to at least `niceness` (processes it starts from now on inherit it): once, however
    often it is called (a benchmark runs several campaigns in one process); False where the system refuses."""
    try:
        os.nice(max(niceness - os.nice(0), 0))
    except (OSError, AttributeError):  # no os.nice off Unix
        return False
    return True


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0
