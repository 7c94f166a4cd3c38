"""Transparent huge pages for the free top of glibc's heap, where each graph's z3 context is allocated.

A z3 context starts by writing two hash tables of several MiB each (its terms' and its printer's). On 4 KiB pages,
in a virtual machine, that write and the solving after it miss the TLB page by page; on 2 MiB pages they rarely do.
Kernels set to give huge pages only where asked (`madvise` mode) are asked here for a fresh stretch of the heap that
a kept-memory process (generators/solver.keep_freed_memory) then reuses graph after graph. Only that stretch: the
rest of a worker's heap is shared with the fork server it came from, and collapsing it into huge pages would copy it.
Graphs do not change: z3's answers depend on its terms, never on where they lie.
"""

from __future__ import annotations

import ctypes

_MADV_HUGEPAGE = 14
_PAGE = 4096


def huge_heap_top(reserve_bytes: int) -> bool:
    """Grow the heap by a free block of `reserve_bytes` advised onto huge pages; False where this process has no
    glibc or the kernel declines.

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
    block = malloc(reserve_bytes)
    if not block:
        return False
    start = -(-block // _PAGE) * _PAGE  # madvise takes whole pages
    end = (block + reserve_bytes) // _PAGE * _PAGE
    advised = madvise(start, end - start, _MADV_HUGEPAGE) == 0
    # Freed at once, the block joins the top of the heap untouched: its pages fault in later, as huge ones.
    free(block)
    return advised
