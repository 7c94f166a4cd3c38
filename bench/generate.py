"""Generator benchmark: diversity over N seeds of 10 nodes, valid-input rate, and milliseconds per graph.

Prints distinct operator types, distinct (operator, dtype) pairs, the dtype mix, the share of graphs with several
inputs / outputs, the valid-input rate with the median search time, and the median time per graph at 5, 10, 20 and
50 nodes split into generation, materialization and input search.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generators.generator import GenOptions, generate  # noqa: E402
from generators.materialize import materialize  # noqa: E402
from generators.registry import REGISTRY  # noqa: E402
from generators.valid_inputs import find_valid_inputs  # noqa: E402


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


def speed(sizes: list[int], seeds: int, budget_s: float) -> None:
    print(f"median milliseconds per graph over {seeds} seeds (generation + materialization + input search):")
    for nodes in sizes:
        rows = [timed_graph(10_000 + seed, nodes, budget_s)[2] for seed in range(seeds)]
        gen, mat, search = (statistics.median(col) * 1000 for col in zip(*rows))
        total = statistics.median(sum(r) for r in rows) * 1000
        print(f"  {nodes:>3} nodes: total {total:7.1f}  generation {gen:7.1f}  materialization {mat:5.1f}  "
              f"input search {search:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--speed-seeds", type=int, default=60)
    parser.add_argument("--budget", type=float, default=1.0, help="input-search budget in seconds")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    diversity(args.seeds, args.budget)
    speed([5, 10, 20, 50], args.speed_seeds, args.budget)


if __name__ == "__main__":
    main()
