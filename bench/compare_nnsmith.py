"""convsmith's campaign next to NNSmith's own fuzz loop, on this machine, at the same graph size: tests (models) per
minute and bug reports saved.

    bash bench/nnsmith_env.sh                      # once: .venv-nnsmith with NNSmith from PyPI
    python bench/compare_nnsmith.py [--minutes 2] [--nodes 5,10] [--workers 1] [--skip-nnsmith]

Both sides test the same pipeline: a random graph of exactly `--nodes` operators in PyTorch (NNSmith's generator
inserts operators until it has `max_nodes` of them, placeholders not counted; convsmith runs with `--min-nodes`
equal to `--nodes`), exported to ONNX by the TorchScript exporter (convsmith: `--converters torch-onnx-script`;
NNSmith: `model.type=onnx`, whose exporter the launcher in bench/nnsmith_loop.py selects), run by ONNX Runtime and
compared with PyTorch. Both leave out what the exporter does not support: NNSmith by its cached operator probe,
convsmith by `--avoid-unsupported` (its own cached probe; run `convsmith probe` once). NNSmith does not minimize
what it finds, so convsmith runs with `--no-reduce` (a campaign minimizes new cases in a background process by
default, which on a machine with one worker per core takes CPU from the workers). They run one after the
other, never at once, in alternating slices (`--rounds`, 3 by default: convsmith's campaign resumed for each of its
slices, NNSmith run afresh), so that a slow spell of a shared machine falls on both. convsmith runs `--workers`
processes (1 by default, as NNSmith's loop is one process that uses one core); with `--workers 2` the table shows
what each tool makes of this 2-core machine. Each convsmith worker has a feeder process that generates the next
graphs while the worker converts (`--no-prepare-ahead` turns it off): one worker then keeps two cores busy, NNSmith's
loop one. A short untimed run of each tool comes first
(`--warmup-s`), so that both start warm: NNSmith builds its operator probe on its first run.

The figures are not of one kind in every respect, and the output says so:
  - a convsmith test is one graph through one converter, each graph with searched NaN/Inf-free inputs and a float64
    reference; an NNSmith model is one generated model with random inputs and the PyTorch output as its oracle;
  - convsmith saves one case folder per distinct bug signature; NNSmith saves one report folder per failing model
    (not deduplicated), so its count of distinct exception messages is shown beside it;
  - both rates are over the loop, from the first result to the last, as NNSmith's log allows: start-up (imports,
    workers, the cached probes) is left out on both sides; convsmith's rate over its whole session is shown too;
  - convsmith's campaign process lowers its own priority below its workers' (nice +5; fuzzer/campaign/supervisor.py,
    yield_to_workers), and NNSmith's runs, started later from this process, inherit it: no difference to a process
    that runs alone, as each slice does;
  - both run the same torch.onnx exporter, but not in the same surroundings: convsmith imports ONNX Runtime with
    pybind11 internals of its own (fuzzer/support/pybind_internals.py), while in NNSmith's process ONNX Runtime's
    exception translators run for every exception torch's bindings raise, which made a 5-node export 1.5x as slow
    (bench/pybind_internals.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fuzz as convsmith_bench  # noqa: E402  (bench/fuzz.py)
import nnsmith_loop  # noqa: E402

from fuzzer.campaign.db import open_campaign  # noqa: E402
from fuzzer.campaign.progress import summarize  # noqa: E402
from fuzzer.commands.main import main as cli_main  # noqa: E402

CONVERTER = "torch-onnx-script"


def run_convsmith(minutes: float, nodes: int, workers: int, out: Path, prepare_ahead: bool = True) -> dict:
    """One slice of convsmith's campaign in `out`: a new campaign, or the next session of the one there."""
    if (out / "campaign.db").exists():
        code = cli_main(["fuzz", "--resume", str(out), "--time", f"{minutes * 60:g}s", "--workers", str(workers),
                         "--no-reduce"])
        data = summarize(open_campaign(out))
    else:
        code, data, out = convsmith_bench.measure(minutes, workers, CONVERTER, nodes, out, exact_nodes=True,
                                                  avoid_unsupported=True, reduce=False,
                                                  settings="default",  # NNSmith exports at one opset
                                                  prepare_ahead=prepare_ahead)
    return convsmith_figures(code, data, out, prepare_ahead)


def convsmith_figures(code: int, data: dict, folder: Path, prepare_ahead: bool) -> dict:
    """The campaign's loop rate over all its sessions (each from its first test to its last, gaps left out)."""
    conn = open_campaign(folder).conn
    failing = conn.execute("SELECT COUNT(*) FROM tests WHERE is_bug = 1").fetchone()[0]
    unsupported = conn.execute("SELECT COUNT(*) FROM tests WHERE symptom = 'unsupported'").fetchone()[0]
    # Only tests that ran the converter count (stage "source": the source failed, or the probe skipped it).
    spans = conn.execute("SELECT MAX(finished) - MIN(finished), COUNT(*) FROM tests WHERE stage != 'source' "
                         "GROUP BY session").fetchall()
    loop_s = sum(span for span, _ in spans)
    ran = sum(n for _, n in spans)
    loop_rate = (ran - len(spans)) / (loop_s / 60) if loop_s > 0 else 0.0
    # Each session is one slice of the comparison: its own rate shows how much the figure moves between slices.
    slice_rates = [(n - 1) / (span / 60) for span, n in spans if span > 0]
    return {"code": code, "tests": ran, "prepare_ahead": prepare_ahead, "tests_per_min": data["tests_per_min"],
            "wall_s": data["wall_s"],
            "loop_s": loop_s, "loop_per_min": loop_rate, "slice_rates": slice_rates,
            "reports": len(data["bugs"]), "failing_tests": failing, "unsupported": unsupported,
            "outside": convsmith_bench.outside_share(data), "out": str(folder)}


def combined(slices: list[dict]) -> dict:
    """NNSmith's figures over all slices: counts added, rates over the added loop time."""
    total = {key: sum(r[key] for r in slices) for key in ("models", "loop_s", "startup_s", "reports", "failed_make",
                                                             "stalls", "stall_s", "killed")}
    kinds: dict[str, int] = {}
    for r in slices:
        for kind, n in r["reports_by_kind"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    loop_s, stall_s = total["loop_s"], total["stall_s"]
    return {**total, "reports_by_kind": kinds, "returncode": max((r["returncode"] for r in slices), key=abs),
            "distinct_exceptions": len(set().union(*(r["exception_messages"] for r in slices))),
            "models_per_min": total["models"] / (loop_s / 60) if loop_s > 0 else 0.0,
            "unstalled_per_min": (total["models"] - total["stalls"]) / ((loop_s - stall_s) / 60)
            if loop_s - stall_s > 0 else 0.0,
            "nodes": slices[0]["nodes"], "out": ", ".join(r["out"] for r in slices),
            "slice_rates": [r["models_per_min"] for r in slices]}


def _slices(figures: dict) -> str:
    """Each slice's rate, when there was more than one: a seed-driven spread that a single ratio hides."""
    rates = figures.get("slice_rates") or []
    return f"; per slice {'/'.join(f'{r:.0f}' for r in rates)}/min" if len(rates) > 1 else ""


def table(rows: list[tuple[int, dict, dict | None]], workers: int, minutes: float) -> str:
    head = (f"{'nodes':>5}  {'fuzzer':<28} {'loop tests/min':>14} {'tests':>7} {'reports saved':>14} "
            f"{'failing tests':>14}  notes")
    lines = [head, "-" * len(head)]
    for nodes, ours, theirs in rows:
        lines.append(f"{nodes:>5}  {'convsmith (' + CONVERTER + ')':<28} {ours['loop_per_min']:>14.1f} "
                     f"{ours['tests']:>7} {ours['reports']:>14} {ours['failing_tests']:>14}  "
                     f"{workers} worker(s){' + feeder(s)' if ours['prepare_ahead'] else ''}, "
                     f"{ours['loop_s']:.0f} s loop; {ours['tests_per_min']:.1f}/min over "
                     f"{ours['wall_s']:.0f} s wall with start-up; {ours['unsupported']} unsupported, "
                     f"{ours['outside']:.0%} of loop time outside converter/runtime{_slices(ours)}")
        if theirs is None:
            continue
        failing = sum(theirs["reports_by_kind"].values())
        lines.append(f"{nodes:>5}  {'nnsmith 0.1.0 (onnx, ort)':<28} {theirs['models_per_min']:>14.1f} "
                     f"{theirs['models']:>7} {theirs['reports']:>14} {failing:>14}  "
                     f"1 process, {theirs['loop_s']:.0f} s loop (+{theirs['startup_s']:.0f} s start-up), "
                     f"{theirs['distinct_exceptions']} distinct exception messages, "
                     f"{theirs['failed_make']} failed to make"
                     + ("" if theirs["returncode"] == 0 else f", exit status {theirs['returncode']}")
                     + _slices(theirs))
        # Against NNSmith's rate without its stalls where it had any: the ratio that favours NNSmith.
        rate = theirs["unstalled_per_min"] if theirs.get("stalls") else theirs["models_per_min"]
        ratio = ours["loop_per_min"] / rate if rate else float("nan")
        note = (f"  against NNSmith without its {theirs['stalls']} stalled model(s) ({rate:.1f}/min); with them "
                f"{ours['loop_per_min'] / theirs['models_per_min']:.2f}x") if theirs.get("stalls") else ""
        lines.append(f"{nodes:>5}  {'convsmith / nnsmith':<28} {ratio:>13.2f}x{note}")
    lines.append("")
    lines.append(f"{minutes:g} min each, one after the other in alternating slices, on {os.cpu_count()} cores. "
                 "Other engineers' jobs may "
                 "run on this machine at the same time, so the rates are indicative, not exact.")
    lines.append("reports saved: convsmith's deduplicated bug case folders; NNSmith's report folders, one per "
                 "failing model (not deduplicated). failing tests: tests (models) that were counted as a bug.")
    lines.append("exporter: the same torch.onnx code on both sides; convsmith imports ONNX Runtime with pybind11 "
                 "internals of its own, NNSmith's process shares torch's, whose exports then run slower "
                 "(bench/pybind_internals.py).")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0, help="time budget of each run (default 2)")
    parser.add_argument("--nodes", default="5,10", help="comma-separated graph sizes, operators per graph")
    parser.add_argument("--workers", type=int, default=1, help="convsmith's worker processes (default 1)")
    parser.add_argument("--memory-gb", type=float, default=8.0, help="NNSmith's address-space cap")
    parser.add_argument("--out", type=Path, help="folder for both sides' campaigns (default: a temporary one)")
    parser.add_argument("--skip-nnsmith", action="store_true", help="convsmith only (no .venv-nnsmith needed)")
    parser.add_argument("--no-prepare-ahead", action="store_true",
                        help="convsmith's workers generate in process, without a feeder process each")
    parser.add_argument("--rounds", type=int, default=3,
                        help="each tool's --minutes are split into this many slices, run alternately (default 3)")
    parser.add_argument("--warmup-s", type=float, default=20.0,
                        help="a short run of each tool first, untimed, so that both start with warm caches")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    sizes = [int(n) for n in args.nodes.split(",") if n.strip()]
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file: give a new or empty folder")
    if args.out is not None and args.out.exists() and any(args.out.iterdir()):
        # Each slice resumes the campaign in its folder: an earlier run's sessions would be counted with this one's.
        parser.error(f"--out {args.out} is not empty: give a new or empty folder")
    out = args.out or Path(tempfile.mkdtemp(prefix="compare-nnsmith-"))
    print(f"compare: {args.minutes:g} min per run, nodes {sizes}, output in {out}", flush=True)
    if not args.skip_nnsmith and not (nnsmith_loop.VENV / "bin" / "python").exists():
        print(f"compare: {nnsmith_loop.VENV} is missing: run `bash bench/nnsmith_env.sh` (or pass --skip-nnsmith)")
        return 2
    if args.warmup_s > 0:
        print(f"compare: warming both tools up ({args.warmup_s:g} s each, not counted: NNSmith builds its operator "
              "probe on its first run, convsmith its probe and caches)", flush=True)
        run_convsmith(args.warmup_s / 60, sizes[0], args.workers, out / "convsmith-warmup", not args.no_prepare_ahead)
        if not args.skip_nnsmith:
            nnsmith_loop.run_loop(args.warmup_s / 60, sizes[0], out / "nnsmith-warmup", args.memory_gb)
    rows = []
    slice_min = args.minutes / args.rounds
    for nodes in sizes:
        ours, slices = {}, []
        for r in range(args.rounds):  # alternating, so that a slow spell of the machine falls on both tools
            print(f"compare: convsmith, {nodes} nodes, round {r + 1} of {args.rounds} ...", flush=True)
            ours = run_convsmith(slice_min, nodes, args.workers, out / f"convsmith-{nodes}", not args.no_prepare_ahead)
            if not args.skip_nnsmith:
                print(f"compare: nnsmith, {nodes} nodes, round {r + 1} of {args.rounds} ...", flush=True)
                slices.append(nnsmith_loop.run_loop(slice_min, nodes, out / f"nnsmith-{nodes}-{r + 1}", args.memory_gb))
        theirs = combined(slices) if slices else None
        if theirs is not None:
            print(nnsmith_loop.describe(theirs), flush=True)
        rows.append((nodes, ours, theirs))
    print()
    print(table(rows, args.workers, args.minutes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
