"""Confining a child process that runs converters: no Ctrl-C, death with its parent, one thread, an address-space
limit, its output in a log, its temporary files in a folder of its own (fuzzer/support/scratch.py) and its fatal
signals and hangs in a faulthandler file (campaign workers and the reducer's checker share this)."""

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


def confine(memory_mb: int, device: str, log_dir: str | Path) -> IO[str]:
    """Set this process up to run converters (see the module doc); returns the open fault file."""
    detach_from_terminal_and_parent()
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
