"""Heap buffer overflow in torch's TorchScript ONNX exporter (ONNX shape inference of Slice).

F.pad(x, pad, mode="circular") on an *unbatched* input (rank == len(pad) // 2 + 1, e.g. a
(C, H, W) tensor with a 4-element pad) is lowered by symbolic_opset9._pad_circular to
onnx::Slice nodes with axes=[2 + idx], i.e. it assumes a batch dimension. For a rank-3 input
with W padding that gives Slice(axes=[3]) on a rank-3 tensor. torch's per-node ONNX shape
inference (torch::jit::ProcessSliceNode -> ComputeShapeForSlice, shape_type_inference.cpp)
checks `axis >= 0` but not `axis < rank`, reads input_shape[3] and writes final_shape[3]
8 bytes past a 24-byte std::vector<ShapeSymbol>: it overwrites the next malloc chunk's header
and glibc aborts later ("free(): invalid pointer", "free(): invalid next size (fast)",
"malloc_consolidate(): invalid chunk size", ...).

Usage:
  python repro.py             # export in a child process; exit 1 if the child dies of a signal
  python repro.py --valgrind  # run the child under valgrind (slow, ~3-5 min); exit 1 if it
                              # reports an invalid write in ProcessSliceNode
Exit status: 1 = bug reproduces, 0 = it does not.
"""
import os
import re
import shutil
import subprocess
import sys

CASES = [  # (input shape, pad): unbatched inputs, the pad on the last dim lands on axis == rank
    ((1, 2, 3), (1, 1, 1, 1)),
    ((11, 4, 21), (5, 0, 2, 3)),
]


def child() -> None:
    import io
    import warnings

    import torch
    import torch.nn.functional as F

    warnings.simplefilter("ignore")

    class M(torch.nn.Module):
        def __init__(self, pad):
            super().__init__()
            self.pad = pad

        def forward(self, x):
            return F.pad(x, self.pad, mode="circular")

    for shape, pad in CASES:
        x = torch.randn(shape)
        print(f"eager {shape} pad={pad} -> {tuple(M(pad)(x).shape)}", flush=True)
        f = io.BytesIO()
        torch.onnx.export(M(pad), (x,), f, dynamo=False, opset_version=17)
        print(f"exported {shape} pad={pad}: {len(f.getvalue())} bytes, no crash", flush=True)


def main() -> int:
    import torch

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}", flush=True)
    cmd = [sys.executable, os.path.abspath(__file__), "--child"]
    if "--valgrind" in sys.argv:
        vg = shutil.which("valgrind")
        if vg is None:
            print("valgrind not found")
            return 0
        env = dict(os.environ, PYTHONMALLOC="malloc")
        r = subprocess.run([vg, "--undef-value-errors=no", "--num-callers=4", *cmd],
                           env=env, capture_output=True, text=True)
        lines = r.stderr.splitlines()
        hits = []
        for i, line in enumerate(lines):
            if re.search(r"Invalid (write|read) of size", line):
                hits.append("\n".join(lines[i:i + 6]))
        print(r.stdout, end="")
        for h in hits:
            if "libtorch" in h:  # skip ld.so strncmp noise
                print(h)
        bad = [h for h in hits if "Invalid write" in h and "ProcessSliceNode" in h]
        print(f"valgrind: {len(hits)} invalid accesses, {len(bad)} invalid writes in ProcessSliceNode")
        return 1 if bad else 0

    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout, end="")
    tail = [ln for ln in r.stderr.splitlines() if ln.strip()][-3:]
    if r.returncode < 0:
        print("\n".join(tail))
        print(f"BUG REPRODUCED: export process killed by signal {-r.returncode} (heap corruption)")
        return 1
    if r.returncode != 0:
        print("\n".join(tail))
        print(f"export raised a Python error (rc={r.returncode}); heap corruption not reproduced")
        return 0
    print("no crash (the overflow may still happen silently: run with --valgrind)")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
