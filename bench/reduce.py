"""Reduction benchmark: reduce real findings (case folders) and print, per case, nodes before and after, seconds,
the passes that helped, whether the reduced case still reproduces with the same signature, and whether a suggested
fix (fuzzer/diagnosis/repair.py) was found for it and, judged again, made the outputs agree; then medians and the share
of divergence cases whose suggested fix made the outputs agree.

    python bench/reduce.py bugs/                        # every case folder under bugs/
    python bench/reduce.py --hunt 12 --seeds 0:400 found/  # first search seeds for 12 distinct findings
    python bench/reduce.py found/ --out reduced/ --budget 60

The hunt runs checks in child processes (a finding may kill its process), one chunk of seeds per child.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

DEFAULT_CONVERTERS = ("torch-onnx-script", "ort-optimizer", "onnxsim", "onnxslim", "onnxoptimizer",
                      "onnx-version-converter")


def hunt_chunk(seeds: range, converters: list[str], out: Path, nodes: int) -> None:
    """Check every (seed, converter); write one case folder per new bug signature. Runs in a child process."""
    from fuzzer.cases.case import case_from_result, case_id, case_log, collect_versions
    from fuzzer.cases.folder import write_case
    from fuzzer.check.pipeline import run_check
    from fuzzer.converters import CONVERTERS
    from generators.generator import GenerationError, GenOptions, generate

    seen = {p.name for p in out.iterdir()} if out.exists() else set()
    for seed in seeds:
        try:
            graph = generate(seed, GenOptions(nodes=nodes))
        except GenerationError:
            continue
        for conv in converters:
            print(f"START {seed}", flush=True)
            result = run_check(graph, seed, conv)
            v = result.verdict
            if v.is_bug and case_id(v.signature) not in seen:
                seen.add(case_id(v.signature))
                versions = collect_versions(CONVERTERS[conv].distributions)
                write_case(out, case_from_result(result, graph, seed, conv, versions, log=case_log(result)))
                print(f"FOUND {seed} {conv} {v.signature}", flush=True)


def hunt(want: int, first: int, last: int, converters: list[str], out: Path, nodes: int, chunk: int = 25) -> None:
    start = first
    while start < last and _count(out) < want:
        stop = min(start + chunk, last)
        cmd = [sys.executable, __file__, "--hunt-worker", f"{start}:{stop}", "--converters", ",".join(converters),
               "--nodes", str(nodes), str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        starts = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("START")]
        if proc.returncode != 0 and starts:  # the child died on a seed: skip that seed
            start = int(starts[-1]) + 1
            print(f"  seed {starts[-1]}: child exited {proc.returncode}, skipped", file=sys.stderr)
        else:
            start = stop
        print(f"  hunted seeds {first}..{start}: {_count(out)} distinct findings", file=sys.stderr)


def _count(out: Path) -> int:
    return len(_case_dirs(out)) if out.exists() else 0


def _case_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/case.json") if not p.parent.name.endswith("-reduced"))


def fix_outcome(case: Any) -> str:
    """'agrees' when a suggested fix was found and, judged again on the case's inputs, makes the outputs agree;
    'no fix' when none was found (or it does not hold up); '-' for a case that is no divergence with a model."""
    from fuzzer.cases.replay import case_expected
    from fuzzer.check.result import Expected
    from fuzzer.converters import CONVERTERS
    from fuzzer.diagnosis.repair import agrees, suggest_fix

    if not case.verdict.symptom.is_divergence or case.model is None:
        return "-"
    fix = suggest_fix(case)
    expected = case_expected(case)
    held = fix is not None and fix.model is not None and isinstance(expected, Expected) \
        and agrees(fix.model, expected, CONVERTERS[case.converter])
    return "agrees" if held else "no fix"


def bench(cases: list[Path], budget: float, out: Path | None) -> int:
    import tempfile

    from fuzzer.cases.folder import load_case, read_case
    from fuzzer.cases.replay import Outcome, replay
    from fuzzer.reduce.case import ReductionFailed, reduce_case
    from fuzzer.reduce.isolated import IsolatedChecker

    rows = []
    print(f"{'case':72} {'before':>6} {'after':>5} {'secs':>6}  same-sig  {'fix':6}  passes that helped")
    scratch = tempfile.TemporaryDirectory(prefix="convsmith-bench-reduce-")
    with IsolatedChecker() as checker:  # one checker child for every case, as a campaign's reducer has
        for folder in cases:
            case = load_case(folder)
            try:
                reduction = reduce_case(case, out or Path(scratch.name), checker, budget, original=folder.name)
            except ReductionFailed as exc:
                print(f"{case.id[:72]:72} reduction failed: {exc}")
                continue
            result = reduction.result
            reduced = read_case(reduction.path)
            same = replay(reduced).outcome is Outcome.REPRODUCES
            fix = fix_outcome(reduced)
            rows.append((int(result.size_before[0]), int(result.size_after[0]), result.seconds, same, fix))
            print(f"{case.id[:72]:72} {rows[-1][0]:6d} {rows[-1][1]:5d} {result.seconds:6.1f}  {str(same):8}  "
                  f"{fix:6}  {', '.join(result.helped) or '-'}", flush=True)
    scratch.cleanup()
    if not rows:
        print("no cases reduced")
        return 1
    divergences = [r for r in rows if r[4] != "-"]
    fixed = sum(r[4] == "agrees" for r in divergences)
    share = f"{fixed}/{len(divergences)} ({100 * fixed / len(divergences):.0f}%)" if divergences else "no divergences"
    print(f"\n{len(rows)} cases: median nodes {statistics.median(r[0] for r in rows)} -> "
          f"{statistics.median(r[1] for r in rows)}, median seconds {statistics.median(r[2] for r in rows):.1f}, "
          f"max seconds {max(r[2] for r in rows):.1f}, same signature after reduction: "
          f"{sum(r[3] for r in rows)}/{len(rows)}, suggested fix made the outputs agree: {share}")
    return 0 if all(r[3] for r in rows) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", type=Path, nargs="?", default=Path("bugs"), help="folder of case folders")
    parser.add_argument("--budget", type=float, default=60.0, help="reduction budget per case, seconds")
    parser.add_argument("--out", type=Path, help="write the reduced cases here")
    parser.add_argument("--limit", type=int, help="reduce at most this many cases")
    parser.add_argument("--hunt", type=int, default=0, help="first search seeds until this many findings exist")
    parser.add_argument("--seeds", default="0:2000", help="seed range for --hunt, FIRST:LAST")
    parser.add_argument("--nodes", type=int, default=4, help="operators per hunted graph")
    parser.add_argument("--converters", default=",".join(DEFAULT_CONVERTERS))
    parser.add_argument("--hunt-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    converters = [c for c in args.converters.split(",") if c]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.hunt_worker:
        first, last = map(int, args.hunt_worker.split(":"))
        args.cases.mkdir(parents=True, exist_ok=True)
        hunt_chunk(range(first, last), converters, args.cases, args.nodes)
        return 0
    if args.hunt:
        first, last = map(int, args.seeds.split(":"))
        args.cases.mkdir(parents=True, exist_ok=True)
        hunt(args.hunt, first, last, converters, args.cases, args.nodes)
    cases = _case_dirs(args.cases)[: args.limit]
    return bench(cases, args.budget, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
