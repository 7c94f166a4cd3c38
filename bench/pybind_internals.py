"""torch.onnx's TorchScript exporter in a process that imported ONNX Runtime as usual, against one that imported it with
pybind11 internals of its own (fuzzer/support/pybind_internals.py, what convsmith does): the same graphs, exported by
one process after the other, in alternating rounds.

    python bench/pybind_internals.py [--nodes 5] [--graphs 150] [--rounds 3]

Each process also times an empty walk over a TorchScript graph's nodes: the pybind11 iterator ends by a C++ exception,
which is offered to every exception translator in the shared pybind11 internals (ONNX Runtime's too, when shared).
The graphs are the generator's for seeds 0.., with `pad_circular` left out (it corrupts the exporter's heap).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("shared", "own")  # ONNX Runtime's pybind11 internals: shared with torch's, or its own


def child(mode: str, nodes: int, graphs: int, passes: int) -> dict:
    """In this process: import ONNX Runtime as `mode` says, then time the exports of the graphs `passes` times."""
    import torch

    if mode == "shared":
        import onnxruntime  # noqa: F401  (first, as usual: fuzzer's own import then finds it imported)
    sys.path.insert(0, str(ROOT))
    from fuzzer.check.result import Expected
    from fuzzer.check.source import prepare
    from fuzzer.converters.conversion import Steps
    from fuzzer.converters.runtime import ort  # noqa: F401  (imports ONNX Runtime with its own internals)
    from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
    from fuzzer.support.pybind_internals import KEPT_PREFIX, places
    from generators.generator import GenOptions, generate

    torch.set_num_threads(1)
    own = any(str(key).startswith(KEPT_PREFIX) for where in places() for key in where)
    sources = []
    for seed in range(graphs):
        graph = generate(seed, GenOptions(nodes=nodes, exclude_ops=("pad_circular",)))
        prepared = prepare(graph, seed, {}, 1.0)
        if isinstance(prepared, Expected):
            sources.append(prepared.source)

    def export_all() -> float:
        start = time.perf_counter()
        for source in sources:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    export_script(source, ScriptOptions(), Steps())
                except Exception:  # an exporter's failure is part of its cost, as in a campaign
                    pass
        return (time.perf_counter() - start) / len(sources)

    export_all()  # warm
    per_export = min(export_all() for _ in range(passes))
    empty = torch._C.Graph()
    start = time.perf_counter()
    for _ in range(5000):
        for _node in empty.nodes():
            pass
    walk = (time.perf_counter() - start) / 5000
    return {"mode": mode, "own_internals": own, "graphs": len(sources), "export_ms": per_export * 1e3,
            "walk_us": walk * 1e6}


def run_child(mode: str, args: argparse.Namespace) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--nodes", str(args.nodes),
                          "--graphs", str(args.graphs), "--passes", str(args.passes)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5, help="operators per graph (default 5)")
    parser.add_argument("--graphs", type=int, default=150, help="seeds to generate graphs from (default 150)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two processes (default 3)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per process; the fastest counts")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.nodes, args.graphs, args.passes)))
        return 0
    results: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for round_ in range(args.rounds):
        for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
            result = run_child(mode, args)
            if result["own_internals"] != (mode == "own"):
                print(f"pybind_internals: the {mode!r} process did not import ONNX Runtime as asked", file=sys.stderr)
                return 1
            results[mode].append(result)
            print(f"round {round_ + 1}: {mode:>6}: {result['export_ms']:.2f} ms per export of {result['graphs']} "
                  f"{args.nodes}-node graphs; an empty walk over graph nodes {result['walk_us']:.1f} us", flush=True)
    shared = statistics.median(r["export_ms"] for r in results["shared"])
    own = statistics.median(r["export_ms"] for r in results["own"])
    walk_shared = statistics.median(r["walk_us"] for r in results["shared"])
    walk_own = statistics.median(r["walk_us"] for r in results["own"])
    print(f"median over rounds: ONNX Runtime sharing torch's pybind11 internals {shared:.2f} ms per export, with "
          f"its own {own:.2f} ms ({shared / own:.2f}x); an empty walk {walk_shared:.1f} against {walk_own:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
