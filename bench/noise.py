"""How noisy is a fixed tolerance? Random graphs through each converter, two oracles side by side.

For every output the fixed tolerance of the published study (rtol 1e-3, atol 1e-7, no float64 reference)
is compared with the precision-aware oracle (per-dtype tolerance + float64 blame). Prints per converter how
many outputs each flags, then the precision-aware findings grouped by signature.

    python bench/noise.py --graphs 300 --converters torch-onnx-script ort-optimizer
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tqdm import tqdm

from fuzzer.check.pipeline import CheckOptions, CheckResult, run_check
from fuzzer.converters import list_converters
from generators.dtypes import DType
from generators.generator import GenerationError, GenOptions, generate
from oracles.blame import blame_output
from oracles.compare import FLOAT_DTYPES, Tolerance, compare
from oracles.verdict import Symptom

FIXED = Tolerance(rtol=1e-3, atol=1e-7)


@dataclass
class Tally:
    graphs: int = 0
    outputs: int = 0
    fixed_flags: int = 0
    aware_flags: int = 0
    symptoms: Counter = field(default_factory=Counter)
    signatures: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    seconds: float = 0.0
    # For each value divergence the precision-aware oracle flags: (target error, source error) vs float64.
    errors: list[tuple[float, float]] = field(default_factory=list)


def output_flags(result: CheckResult, errors: list[tuple[float, float]]) -> tuple[int, int, int]:
    """(outputs, flagged by the fixed tolerance, flagged by the precision-aware oracle) of one run.

    Appends (target error, source error) against the float64 reference for each value divergence flagged.
    """
    run, expected = result.target, result.expected
    if run is None or expected is None or len(run.outputs) != len(expected.eager):
        return 0, 0, 0
    baseline = run.baseline if run.baseline is not None else expected.eager
    if any(b.dtype != e.dtype or b.shape != e.shape for b, e in zip(baseline, expected.eager, strict=True)):
        return 0, 0, 0  # the unconverted model already disagrees with the graph: the exporter's finding
    fixed = aware = 0
    for actual, base, ref, dtype in zip(run.outputs, baseline, expected.reference, expected.source.output_dtypes,
                                        strict=True):
        tol = FIXED if dtype in FLOAT_DTYPES else None
        fixed += not compare(actual, base, dtype, tol).ok
        if compare(actual, base, dtype).ok:
            continue
        if actual.shape != base.shape:
            aware += 1
            continue
        blame = blame_output(base, actual, ref, dtype)
        if blame.blamed:
            aware += 1
            errors.append((blame.target_error, blame.source_error))
    return len(run.outputs), fixed, aware


def bench_converter(name: str, seeds: range, gen: GenOptions, check_options: CheckOptions, progress: bool) -> Tally:
    tally = Tally()
    for seed in tqdm(seeds, desc=name, disable=not progress, unit="graph"):
        try:
            graph = generate(seed, gen)
        except GenerationError:
            continue
        start = time.perf_counter()
        try:
            result = run_check(graph, seed, name, check_options=check_options)
        except Exception as exc:  # a convsmith bug: counted and shown, so one broken op family cannot hide the rest
            tally.symptoms["convsmith-error"] += 1
            tally.signatures[f"convsmith-error {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"].append(seed)
            continue
        finally:
            tally.seconds += time.perf_counter() - start
        tally.graphs += 1
        n, fixed, aware = output_flags(result, tally.errors)
        tally.outputs, tally.fixed_flags, tally.aware_flags = tally.outputs + n, tally.fixed_flags + fixed, \
            tally.aware_flags + aware
        verdict = result.verdict
        tally.symptoms[verdict.symptom.json_name] += 1
        if verdict.is_bug or verdict.symptom is Symptom.FLAKY:  # SOURCE-stage (upstream) verdicts are not ours
            tally.signatures[verdict.signature or verdict.symptom.json_name].append(seed)
    return tally


def report(name: str, tally: Tally) -> None:
    print(f"\n== {name}: {tally.graphs} graphs, {tally.outputs} outputs, {tally.seconds:.1f}s")
    print(f"   fixed tolerance (rtol {FIXED.rtol:g}, atol {FIXED.atol:g}) flags {tally.fixed_flags} outputs; "
          f"precision-aware oracle flags {tally.aware_flags}")
    print("   verdicts: " + ", ".join(f"{k} {v}" for k, v in tally.symptoms.most_common()))
    if tally.errors:
        # Errors in tolerance units against the float64 reference: blamed means target > 1 and > K x source.
        closest = min(tally.errors, key=lambda e: e[0] / max(e[1], 1e-12))
        farther = sum(t > 1 and t > s for t, s in tally.errors)
        print(f"   value divergences flagged: {len(tally.errors)}; target farther from float64 than the source in "
              f"{farther}; closest call: target {closest[0]:.3g} vs source {closest[1]:.3g} tolerance units")
    for signature, seeds in sorted(tally.signatures.items(), key=lambda kv: -len(kv[1])):
        print(f"   {len(seeds):4d}  {signature}  seeds {seeds[:8]}{' ...' if len(seeds) > 8 else ''}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--converters", nargs="*", help="default: every available converter")
    parser.add_argument("--dtypes", default="float32,float64,float16,int32,int64,int8,uint8,bool",
                        help="comma-separated; bfloat16 is left out by default since ORT's CPU kernels mostly lack "
                             "it, which makes most graphs merely unsupported")
    parser.add_argument("--fast", action="store_true", help="no rerun, no locating, no culprit search")
    args = parser.parse_args(argv)
    available = {i.name: i for i in list_converters()}
    names = args.converters or [n for n, i in available.items() if i.available]
    for name in names:
        if name not in available or not available[name].available:
            print(f"skipping {name}: {available[name].reason if name in available else 'unknown converter'}")
    names = [n for n in names if n in available and available[n].available]
    options = CheckOptions(rerun=False, locate=False, culprit=False) if args.fast else CheckOptions()
    gen = GenOptions(nodes=args.nodes, dtypes=tuple(DType(d) for d in args.dtypes.split(",")))
    for name in names:
        report(name, bench_converter(name, range(args.seed, args.seed + args.graphs), gen, options,
                                     sys.stderr.isatty()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
