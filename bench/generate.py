"""Generator benchmark: diversity over N seeds of 10 nodes, valid-input rate, and milliseconds per graph.

Prints distinct operator types, distinct (operator, dtype) pairs, the dtype mix, the share of graphs with several
inputs / outputs, the valid-input rate with the median search time, and the median time per graph at 5, 10, 20 and
50 nodes split into generation, materialization and input search, with the total (a graph and its inputs).
With `--against REV`, the speed figures compare REV's generator with this tree's instead, both imported into this
process (bench/paired_trees.py) and alternating seed by seed (which goes first alternating too), and say how many
seeds gave both trees the same graph.

Beside each size, in the same run, NNSmith's generator (PyPI `nnsmith`, run by bench/nnsmith_gen.py inside
`.venv-nnsmith`, which `bash bench/nnsmith_env.sh` builds) makes graphs of that size from the same seeds; where it
cannot run, its row says why. Both are warmed with a few untimed graphs per size first. The two differ in more than
speed: NNSmith allows tensors of 65,536 elements (convsmith 4,096), and its input search stops after 20 ms.

    python bench/generate.py [--seeds 1000] [--speed-seeds 60] [--sizes 5,10,20,50] [--skip-nnsmith] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paired_trees import PackageTree, export_package  # noqa: E402

from generators.generator import GenOptions, generate  # noqa: E402
from generators.materialize import materialize  # noqa: E402
from generators.registry import REGISTRY  # noqa: E402
from generators.solver import KEEP_FREED_MEMORY_ENV, keep_freed_memory  # noqa: E402
from generators.valid_inputs import find_valid_inputs  # noqa: E402

NNSMITH_PYTHON = ROOT / ".venv-nnsmith" / "bin" / "python"
WARM = 3  # untimed graphs per size first (imports, caches, NNSmith's dtype probe)
Times = tuple[float, float, float]  # generation, materialization, input search (seconds)


def timed_graph(seed: int, nodes: int, budget_s: float):
    t0 = time.perf_counter()
    graph = generate(seed, GenOptions(nodes=nodes))
    t1 = time.perf_counter()
    module = materialize(graph, seed)
    t2 = time.perf_counter()
    found = find_valid_inputs(module, seed, budget_s=budget_s)
    t3 = time.perf_counter()
    return graph, found, (t1 - t0, t2 - t1, t3 - t2)


def diversity(seeds: int, budget_s: float) -> None:
    ops, pairs, dtypes = Counter(), set(), Counter()
    multi_in = multi_out = valid = 0
    search_ms = []
    for seed in range(seeds):
        graph, found, times = timed_graph(seed, 10, budget_s)
        for node in graph.nodes:
            dtype = graph.types[node.outputs[0]].dtype.value
            ops[node.op] += 1
            pairs.add((node.op, dtype))
            dtypes[dtype] += 1
        multi_in += len(graph.inputs) > 1
        multi_out += len(graph.outputs) > 1
        valid += found.valid
        search_ms.append(times[2] * 1000)
    total = sum(dtypes.values())
    print(f"over {seeds} graphs of 10 nodes:")
    print(f"  distinct operator types seen: {len(ops)} of {len(REGISTRY)} in the catalogue")
    print(f"  distinct (operator, output dtype) pairs: {len(pairs)}")
    print("  dtype mix of node outputs: " + ", ".join(f"{d} {100 * n / total:.1f}%" for d, n in dtypes.most_common()))
    print(f"  graphs with several inputs: {100 * multi_in / seeds:.1f}%, "
          f"several outputs: {100 * multi_out / seeds:.1f}%")
    print(f"  valid-input rate: {100 * valid / seeds:.1f}% (budget {budget_s:.1f} s), "
          f"median search {statistics.median(search_ms):.1f} ms, p95 {sorted(search_ms)[int(0.95 * seeds)]:.1f} ms")


def speed(sizes: list[int], seeds: int, budget_s: float, nnsmith: bool) -> None:
    print(f"median milliseconds per graph over {seeds} seeds, each size warmed with {WARM} untimed graphs first "
          f"(total: the median of each graph's sum; one torch thread in both input searches):")
    print(f"  {'nodes':>5}  {'generator':<15} {'generation':>10} {'materialization':>15} {'input search':>12} "
          f"{'total':>8}")
    for nodes in sizes:
        for seed in range(WARM):
            timed_graph(seed, nodes, budget_s)
        rows = [timed_graph(10_000 + seed, nodes, budget_s)[2] for seed in range(seeds)]
        print(_row(nodes, "convsmith", rows))
        if nnsmith:
            print(_nnsmith_row(nodes, seeds))


def _row(nodes: int, name: str, rows: list[Times], note: str = "") -> str:
    gen, mat, search = (statistics.median(col) * 1000 for col in zip(*rows))
    total = statistics.median(sum(r) for r in rows) * 1000
    return f"  {nodes:>5}  {name:<15} {gen:>10.1f} {mat:>15.1f} {search:>12.1f} {total:>8.1f}{note}"


def _nnsmith_row(nodes: int, seeds: int) -> str:
    """NNSmith's figures at `nodes`, made in its own venv now (between convsmith's sizes: the same machine load)."""
    def unavailable(reason: str) -> str:
        return f"  {nodes:>5}  {'nnsmith':<15} unavailable: {reason}"

    if not NNSMITH_PYTHON.exists():
        return unavailable(".venv-nnsmith is missing (`bash bench/nnsmith_env.sh` builds it from PyPI)")
    command = [str(NNSMITH_PYTHON), str(ROOT / "bench" / "nnsmith_gen.py"), "--nodes", str(nodes),
               "--seeds", str(seeds), "--warm", str(WARM)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=ROOT,
                              env={**os.environ, **KEEP_FREED_MEMORY_ENV})
    except subprocess.TimeoutExpired:
        return unavailable("ran past 30 minutes")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return unavailable((done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1])
    result = json.loads(lines[-1])
    if not result["rows"]:
        return unavailable(f"no seed of {seeds} made a graph")
    note = f"  ({result['failed']} of {seeds} seeds failed)" if result["failed"] else ""
    return _row(nodes, f"nnsmith {result['version']}", result["rows"], note)


TIMED_MODULES = ("generators.generator", "generators.materialize", "generators.valid_inputs")


def _tree_graph(tree: PackageTree, seed: int, nodes: int, budget_s: float) -> tuple[str, float, float]:
    """One tree's graph of `seed` (its text) with its generation and total milliseconds."""
    gen, mat, search = tree.imported
    with tree.active():
        t0 = time.perf_counter()
        graph = gen.generate(seed, gen.GenOptions(nodes=nodes))
        t1 = time.perf_counter()
        search.find_valid_inputs(mat.materialize(graph, seed), seed, budget_s=budget_s)
        t2 = time.perf_counter()
    return graph.dumps(), (t1 - t0) * 1000, (t2 - t0) * 1000


def paired(sizes: list[int], seeds: int, budget_s: float, rev: str) -> None:
    """REV's generator and this tree's, alternating seed by seed in this process: medians, ratios, same graphs."""
    with tempfile.TemporaryDirectory(prefix="generate-against-") as folder:
        old = PackageTree(export_package(ROOT, rev, Path(folder)), TIMED_MODULES)
        new = PackageTree(ROOT, TIMED_MODULES)
        print(f"paired against {rev}: median milliseconds per graph over {seeds} seeds, alternating per seed "
              f"(spread: the per-graph ratio's quartiles):")
        print(f"  {'nodes':>5}  {'generation old -> new':>22}  {'ratio (q1-q3)':>18}  {'total old -> new':>18}  "
              f"{'ratio (q1-q3)':>18}  same graphs")
        for nodes in sizes:
            print(_paired_row(nodes, seeds, budget_s, old, new))


def _paired_row(nodes: int, seeds: int, budget_s: float, old: PackageTree, new: PackageTree) -> str:
    for seed in range(WARM):
        _tree_graph(old, seed, nodes, budget_s)
        _tree_graph(new, seed, nodes, budget_s)
    rows, same = [], 0
    for seed in range(10_000, 10_000 + seeds):
        first, second = (old, new) if seed % 2 == 0 else (new, old)
        results = {id(first): _tree_graph(first, seed, nodes, budget_s),
                   id(second): _tree_graph(second, seed, nodes, budget_s)}
        was, now = results[id(old)], results[id(new)]
        same += was[0] == now[0]
        rows.append((was[1], now[1], was[2], now[2]))
    gen_old, gen_new, tot_old, tot_new = (statistics.median(col) for col in zip(*rows))
    return (f"  {nodes:>5}  {gen_old:>10.2f} -> {gen_new:<8.2f}  {_ratios([r[1] / r[0] for r in rows]):>18}  "
            f"{tot_old:>7.2f} -> {tot_new:<7.2f}  {_ratios([r[3] / r[2] for r in rows]):>18}  {same} of {seeds}")


def _ratios(ratios: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return f"{median:.3f} ({q1:.2f}-{q3:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=1000, help="seeds of the diversity figures (0: none)")
    parser.add_argument("--speed-seeds", type=int, default=60, help="seeds of the speed figures (0: none)")
    parser.add_argument("--budget", type=float, default=1.0, help="input-search budget in seconds")
    parser.add_argument("--sizes", default="5,10,20,50", help="graph sizes (nodes) for the speed figures")
    parser.add_argument("--skip-nnsmith", action="store_true", help="no NNSmith rows")
    parser.add_argument("--against", metavar="REV", help="speed paired with REV's generator instead (no NNSmith)")
    args = parser.parse_args()
    keep_freed_memory()  # as the campaign's workers do; NNSmith's process gets the same settings
    warnings.filterwarnings("ignore")
    # One torch thread for the whole process, as campaign workers run: idle OpenMP threads left spinning by a
    # multi-threaded kernel slowed z3 here by up to 2x (6.6 -> 11.6 ms per 5-node graph after 1000 graphs).
    import torch

    torch.set_num_threads(1)
    if args.seeds:
        diversity(args.seeds, args.budget)
    if not args.speed_seeds:
        return
    if args.against:
        paired([int(n) for n in args.sizes.split(",")], args.speed_seeds, args.budget, args.against)
        return
    speed([int(n) for n in args.sizes.split(",")], args.speed_seeds, args.budget, not args.skip_nnsmith)


if __name__ == "__main__":
    main()
