"""Transparent huge pages for the free top of glibc's heap, where each graph's z3 context is allocated.

A z3 context starts by writing two hash tables of several MiB each (its terms' and its printer's). On 4 KiB pages,
in a virtual machine, that write and the solving after it miss the TLB page by page; on 2 MiB pages they rarely do.
Kernels set to give huge pages only where asked (`madvise` mode) are asked here for a fresh stretch of the heap that
a kept-memory process (generators/solver.keep_freed_memory) then reuses graph after graph. Graphs do not change:
z3's answers depend on its terms, never on where they lie.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

_MADV_HUGEPAGE = 14
_MAPS = Path("/proc/self/maps")


def huge_heap_top(reserve_bytes: int) -> bool:
    """Grow the heap by `reserve_bytes` of free memory and advise huge pages over the whole heap; False where
    this process has no glibc heap or the kernel declines (pages already in use stay as they are).

    `reserve_bytes` must be below malloc's mmap threshold, so that the block comes from the heap's top.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        malloc, free, madvise = libc.malloc, libc.free, libc.madvise
    except (OSError, AttributeError):
        return False
    malloc.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    # Freed at once, the block joins the top of the heap untouched: its pages fault in later, as huge ones.
    free(malloc(reserve_bytes))
    span = _heap_span()
    return span is not None and madvise(span[0], span[1] - span[0], _MADV_HUGEPAGE) == 0


def _heap_span() -> tuple[int, int] | None:
    """The start and end addresses of this process's `[heap]` mapping, if it has one."""
    try:
        lines = _MAPS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.endswith("[heap]"):
            start, end = line.split(maxsplit=1)[0].split("-")
            return int(start, 16), int(end, 16)
    return None
