"""convsmith's campaign next to NNSmith's own fuzz loop, on this machine, at the same graph size and on equal cores:
tests (models) per minute and bug reports saved.

    bash bench/nnsmith_env.sh                      # once: .venv-nnsmith with NNSmith from PyPI
    python bench/compare_nnsmith.py [--minutes 2] [--nodes 5,10] [--pairing per-core|both-cores|both]
                                    [--workers N] [--[no-]prepare-ahead] [--rounds 3] [--skip-nnsmith]

Both sides test the same pipeline: a random graph of exactly `--nodes` operators in PyTorch (NNSmith's generator
inserts operators until it has `max_nodes` of them, placeholders not counted; convsmith runs with `--min-nodes`
equal to `--nodes`), exported to ONNX by the TorchScript exporter (convsmith: `--converters torch-onnx-script`;
NNSmith: `model.type=onnx`, whose exporter the launcher in bench/nnsmith_loop.py selects), run by ONNX Runtime and
compared with PyTorch. Both leave out what the exporter does not support: NNSmith by its cached operator probe,
convsmith by `--avoid-unsupported` (its own cached probe; run `convsmith probe` once). NNSmith does not minimize
what it finds, so convsmith runs with `--no-reduce` (a campaign minimizes new cases in a background process by
default, which on a machine with one worker per core takes CPU from the workers).

Two pairings, each on equal cores (`--pairing`, both by default, each with its own ratio):
  - per core, the ratio to quote: convsmith with 1 worker and no feeder process (`--no-prepare-ahead`: one busy
    core) against one NNSmith process (its loop is one process on one core);
  - both cores (all cores of a larger machine): convsmith as `convsmith fuzz` runs by default here (a worker per core;
    feeder processes where the CPU has a core for each, which a 2-core machine with 2 workers has not) against as
    many NNSmith processes as cores, run at the same time, each with its own output folder and its own seed: their
    rates are added. `--workers` and `--[no-]prepare-ahead` change this pairing's convsmith side only.
Each side of each pairing gets `--minutes`. convsmith and NNSmith never run at once: one after the other, in
alternating slices (`--rounds`, 3 by default: convsmith's campaign resumed for each of its slices, NNSmith run afresh
with new seeds; each round runs every pairing), so that a slow spell of a shared machine falls on both. A short
untimed run of each tool comes first (`--warmup-s`), so that both start warm: NNSmith builds its operator probe on its
first run (one process, so that the processes run at once later do not build it side by side).

The figures are not of one kind in every respect, and the output says so:
  - a convsmith test is one graph through one converter, each graph with searched NaN/Inf-free inputs and a float64
    reference; an NNSmith model is one generated model with random inputs and the PyTorch output as its oracle;
  - convsmith saves one case folder per distinct bug signature; NNSmith saves one report folder per failing model
    (not deduplicated), so its count of distinct exception messages is shown beside it;
  - both rates are over the loop, from the first result to the last, as NNSmith's log allows: start-up (imports,
    workers, the cached probes) is left out on both sides; convsmith's rate over its whole session is shown too;
    with NNSmith processes at once, each one's rate is over its own loop, and the table shows how long the loops
    overlapped;
  - convsmith's campaign process lowers its own priority below its workers' (nice +5; fuzzer/campaign/supervisor.py,
    yield_to_workers), and NNSmith's runs, started later from this process, inherit it: no difference to a process
    that runs alone or beside its own kind, as each slice does;
  - both run the same torch.onnx exporter, but not in the same surroundings: convsmith imports ONNX Runtime with
    pybind11 internals of its own (fuzzer/support/pybind_internals.py), while in NNSmith's process ONNX Runtime's
    exception translators run for every exception torch's bindings raise, which made a 5-node export 1.5x as slow
    (bench/pybind_internals.py).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fuzz as convsmith_bench  # noqa: E402  (bench/fuzz.py)
import nnsmith_loop  # noqa: E402

import fuzzer.commands.fuzz as fuzz_command  # noqa: E402
from fuzzer.campaign.db import open_campaign  # noqa: E402
from fuzzer.campaign.progress import summarize  # noqa: E402
from fuzzer.commands.main import main as cli_main  # noqa: E402

CONVERTER = "torch-onnx-script"
CORES = os.cpu_count() or 1


@dataclass(frozen=True)
class Pairing:
    """convsmith's campaign shape against NNSmith loops run at once, on the same number of cores."""

    name: str  # "per-core" or "both-cores" (--pairing)
    workers: int
    prepare_ahead: bool | None  # None: the campaign's default for `workers`, as `convsmith fuzz` decides it
    processes: int  # NNSmith loops at the same time

    @property
    def title(self) -> str:
        """How the table names the pairing."""
        if self.name == "per-core":
            return "per core"
        return "both cores" if CORES == 2 else f"all {CORES} cores"


def pairings(choice: str, workers: int | None, prepare_ahead: bool | None) -> list[Pairing]:
    """The pairings `--pairing` asks for; the per-core one is 1 worker without a feeder whatever the flags say."""
    per_core = Pairing("per-core", workers=1, prepare_ahead=False, processes=1)
    # `convsmith fuzz`'s own defaults: a worker per core (fuzzer/commands/fuzz.py), feeders as its flags decide.
    whole = Pairing("both-cores", workers=workers or CORES, prepare_ahead=prepare_ahead, processes=CORES)
    return {"per-core": [per_core], "both-cores": [whole], "both": [per_core, whole]}[choice]


def run_convsmith(minutes: float, nodes: int, pairing: Pairing, out: Path) -> dict:
    """One slice of convsmith's campaign in `out`: a new campaign, or the next session of the one there."""
    # `convsmith fuzz` counts its --time from the process's start (fuzzer/campaign/budget.py); this process runs one
    # campaign after another, so each slice's budget counts from its own call instead, or a later slice gets none.
    # patch.object fails loudly should fuzz.py stop using process_started.
    with mock.patch.object(fuzz_command, "process_started", time.monotonic):
        code, data, out = campaign_slice(minutes, nodes, pairing, out)
    figures = convsmith_figures(code, data, out)
    if pairing.name == "per-core" and (figures["workers"] != 1 or figures["prepare_ahead"]):
        # The ratio to quote is of one busy core each: a second worker or a feeder would make it another figure.
        raise RuntimeError(f"{out}: the per-core side ran {figures['workers']} worker(s), feeders "
                           f"{figures['prepare_ahead']}: expected 1 worker without a feeder")
    return figures


def campaign_slice(minutes: float, nodes: int, pairing: Pairing, out: Path) -> tuple[int, dict, Path]:
    """Runs the slice in this process: exit status, summary and folder, as bench/fuzz.py's measure() returns them."""
    if (out / "campaign.db").exists():
        # A resumed campaign keeps its feeder setting (the spec in its database); the worker count is given again.
        code = cli_main(["fuzz", "--resume", str(out), "--time", f"{minutes * 60:g}s", "--workers",
                         str(pairing.workers), "--no-reduce"])
        return code, summarize(open_campaign(out)), out
    return convsmith_bench.measure(minutes, pairing.workers, CONVERTER, nodes, out, exact_nodes=True,
                                   avoid_unsupported=True, reduce=False,
                                   settings="default",  # NNSmith exports at one opset
                                   prepare_ahead=pairing.prepare_ahead)


def convsmith_figures(code: int, data: dict, folder: Path) -> dict:
    """The campaign's loop rate over all its sessions (each from its first test to its last, gaps left out), and the
    shape it really ran in (workers, feeders), read back from its database."""
    db = open_campaign(folder)
    conn = db.conn
    failing = conn.execute("SELECT COUNT(*) FROM tests WHERE is_bug = 1").fetchone()[0]
    unsupported = conn.execute("SELECT COUNT(*) FROM tests WHERE symptom = 'unsupported'").fetchone()[0]
    workers = conn.execute("SELECT MAX(workers) FROM sessions").fetchone()[0] or 0
    prepare_ahead = bool(db.get_meta("spec")["worker"].get("prepare_ahead", False))
    # Only tests that ran the converter count (stage "source": the source failed, or the probe skipped it).
    spans = conn.execute("SELECT MAX(finished) - MIN(finished), COUNT(*) FROM tests WHERE stage != 'source' "
                         "GROUP BY session").fetchall()
    loop_s = sum(span for span, _ in spans)
    ran = sum(n for _, n in spans)
    loop_rate = (ran - len(spans)) / (loop_s / 60) if loop_s > 0 else 0.0
    # Each session is one slice of the comparison: its own rate shows how much the figure moves between slices.
    slice_rates = [(n - 1) / (span / 60) for span, n in spans if span > 0]
    return {"code": code, "tests": ran, "workers": workers, "prepare_ahead": prepare_ahead,
            "ahead_share": data["ahead_share"], "tests_per_min": data["tests_per_min"], "wall_s": data["wall_s"],
            "loop_s": loop_s, "loop_per_min": loop_rate, "slice_rates": slice_rates,
            "reports": len(data["bugs"]), "failing_tests": failing, "unsupported": unsupported,
            "outside": convsmith_bench.outside_share(data), "out": str(folder)}


def run_nnsmith(minutes: float, nodes: int, pairing: Pairing, out: Path, memory_gb: float) -> list[dict]:
    """One slice of NNSmith: `pairing.processes` loops at the same time, each in its own folder with its own seed."""
    # Distinct seeds drawn here, so that no two loops at once test the same models (0 makes NNSmith draw its own).
    seeds = random.SystemRandom().sample(range(1, 2**32), pairing.processes)
    folders = [out] if pairing.processes == 1 else [out / f"process-{k + 1}" for k in range(pairing.processes)]
    with ThreadPoolExecutor(max_workers=pairing.processes) as pool:  # each thread waits on its own subprocess
        runs = [pool.submit(nnsmith_loop.run_loop, minutes, nodes, folder, memory_gb, seed)
                for folder, seed in zip(folders, seeds, strict=True)]
        return [run.result() for run in runs]


def combined(slices: list[dict]) -> dict:
    """One NNSmith process's figures over all slices: counts added, rates over the added loop time."""
    total = {key: sum(r[key] for r in slices) for key in ("models", "loop_s", "startup_s", "reports", "failed_make",
                                                             "stalls", "stalled_models", "stall_s", "killed")}
    kinds: dict[str, int] = {}
    for r in slices:
        for kind, n in r["reports_by_kind"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    loop_s, stall_s = total["loop_s"], total["stall_s"]
    messages = set().union(*(r["exception_messages"] for r in slices))
    return {**total, "reports_by_kind": kinds, "returncode": max((r["returncode"] for r in slices), key=abs),
            "distinct_exceptions": len(messages), "exception_messages": messages,
            "models_per_min": total["models"] / (loop_s / 60) if loop_s > 0 else 0.0,
            # Only the stalls among the models come off them: one failed to make or killed was never counted.
            "unstalled_per_min": (total["models"] - total["stalled_models"]) / ((loop_s - stall_s) / 60)
            if loop_s - stall_s > 0 else 0.0,
            "nodes": slices[0]["nodes"], "out": ", ".join(r["out"] for r in slices),
            "seeds": [r.get("seed") for r in slices], "slice_rates": [r["models_per_min"] for r in slices]}


def overlap_s(loops: list[dict]) -> float:
    """Seconds during which every one of the loops of one slice was running (0 if a log gave no loop)."""
    starts, ends = [r.get("loop_start") for r in loops], [r.get("loop_end") for r in loops]
    if None in starts or None in ends:
        return 0.0
    return max(min(ends) - max(starts), 0.0)


def at_once(rounds: list[list[dict]]) -> dict:
    """NNSmith's figures for loops run at the same time (`rounds[r][k]`: slice r of process k): each process over
    its slices as `combined` does, stalls included, then the processes' counts and rates added."""
    processes = [combined([slices[k] for slices in rounds]) for k in range(len(rounds[0]))]
    total = {key: sum(p[key] for p in processes) for key in ("models", "reports", "failed_make", "stalls", "stall_s",
                                                                "killed", "models_per_min", "unstalled_per_min")}
    kinds: dict[str, int] = {}
    for p in processes:
        for kind, n in p["reports_by_kind"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    return {**total, "reports_by_kind": kinds, "processes": processes,
            "returncode": max((p["returncode"] for p in processes), key=abs),
            "distinct_exceptions": len(set().union(*(p["exception_messages"] for p in processes))),
            # One process: its own loop; several: how long all of them ran together, against each one's own loop.
            "loop_s": sum(overlap_s(slices) for slices in rounds) if len(processes) > 1 else processes[0]["loop_s"],
            "startup_s": max(p["startup_s"] for p in processes),
            "slice_rates": [sum(r["models_per_min"] for r in slices) for slices in rounds]}


def _slices(figures: dict) -> str:
    """Each slice's rate, when there was more than one: a seed-driven spread that a single ratio hides."""
    rates = figures.get("slice_rates") or []
    return f"; per slice {'/'.join(f'{r:.0f}' for r in rates)}/min" if len(rates) > 1 else ""


def convsmith_shape(ours: dict) -> str:
    """The shape a convsmith side really ran in, e.g. '2 workers + feeders' or '1 worker, no feeder'."""
    workers, feeders = ours["workers"], ours["prepare_ahead"]
    if workers == 1:
        return "1 worker" + (" + feeder" if feeders else ", no feeder")
    return f"{workers} workers" + (" + feeders" if feeders else ", no feeders")


def shape(pairing: Pairing, ours: dict) -> str:
    """Both sides of a pairing as they ran, e.g. '2 workers, no feeders : 2 processes at once'."""
    n = pairing.processes
    return f"{convsmith_shape(ours)} : " + ("1 process" if n == 1 else f"{n} processes at once")


def convsmith_line(nodes: int, pairing: Pairing, ours: dict) -> str:
    """A convsmith side's row: its rate, counts, the shape it ran in and its share outside converter/runtime."""
    feeders = f", feeders busy {ours['ahead_share']:.0%} of worker time" if ours["prepare_ahead"] else ""
    return (f"{nodes:>5}  {'convsmith (' + CONVERTER + ')':<28} {ours['loop_per_min']:>14.1f} "
            f"{ours['tests']:>7} {ours['reports']:>14} {ours['failing_tests']:>14}  "
            f"{pairing.title}: {convsmith_shape(ours)}{feeders}, {ours['loop_s']:.0f} s loop; "
            f"{ours['tests_per_min']:.1f}/min over {ours['wall_s']:.0f} s wall with start-up; "
            f"{ours['unsupported']} unsupported, {ours['outside']:.0%} of loop time outside converter/runtime"
            f"{_slices(ours)}")


def nnsmith_line(nodes: int, theirs: dict) -> str:
    """An NNSmith side's row: its rate (added over processes at once), counts, and how its loops ran."""
    failing = sum(theirs["reports_by_kind"].values())
    processes = theirs["processes"]
    if len(processes) == 1:
        running = f"1 process, {theirs['loop_s']:.0f} s loop"
    else:
        rates = " + ".join(f"{p['models_per_min']:.0f}" for p in processes)
        loops = "/".join(f"{p['loop_s']:.0f}" for p in processes)
        running = (f"{len(processes)} processes at once, rates added ({rates}/min), loops of {loops} s "
                   f"overlapping {theirs['loop_s']:.0f} s")
    return (f"{nodes:>5}  {'nnsmith 0.1.0 (onnx, ort)':<28} {theirs['models_per_min']:>14.1f} "
            f"{theirs['models']:>7} {theirs['reports']:>14} {failing:>14}  "
            f"{running} (+{theirs['startup_s']:.0f} s start-up{' at most' if len(processes) > 1 else ''}), "
            f"{theirs['distinct_exceptions']} distinct exception messages, {theirs['failed_make']} failed to make"
            + ("" if theirs["returncode"] == 0 else f", exit status {theirs['returncode']}") + _slices(theirs))


def ratio(ours: dict, theirs: dict) -> tuple[float, str]:
    """convsmith's rate over NNSmith's, and a note when NNSmith stalled."""
    # Against NNSmith's rate without its stalls where it had any: the ratio that favours NNSmith.
    rate = theirs["unstalled_per_min"] if theirs.get("stalls") else theirs["models_per_min"]
    value = ours["loop_per_min"] / rate if rate else float("nan")
    if not theirs.get("stalls"):
        return value, ""
    with_stalls = ours["loop_per_min"] / theirs["models_per_min"] if theirs["models_per_min"] else float("nan")
    return value, (f"; against NNSmith without its {theirs['stalls']} stalled model(s) ({rate:.1f}/min); with them "
                   f"{with_stalls:.2f}x")


Row = tuple[int, Pairing, dict, dict | None]


def pairing_lines(nodes: int, pairing: Pairing, ours: dict, theirs: dict | None) -> list[str]:
    """A pairing's convsmith row, NNSmith row and ratio line."""
    lines = [convsmith_line(nodes, pairing, ours)]
    if theirs is not None:
        value, note = ratio(ours, theirs)
        lines.append(nnsmith_line(nodes, theirs))
        lines.append(f"{nodes:>5}  {'convsmith / nnsmith':<28} {value:>13.2f}x  {pairing.title} "
                     f"({shape(pairing, ours)}){note}")
    return lines


def summary(rows: list[Row]) -> list[str]:
    """The ratios per pairing and size, the per-core one first: the one to quote."""
    lines = []
    for name in ("per-core", "both-cores"):
        mine = [(nodes, pairing, ratio(ours, theirs)[0], shape(pairing, ours))
                for nodes, pairing, ours, theirs in rows if pairing.name == name and theirs is not None]
        if not mine:
            continue
        quote = ", the ratio to quote" if name == "per-core" else ""
        shapes = "; ".join(dict.fromkeys(s for *_, s in mine))
        lines.append(f"convsmith / nnsmith, {mine[0][1].title}{quote} ({shapes}): "
                     + ", ".join(f"{value:.2f}x at {nodes} nodes" for nodes, _, value, _ in mine))
    return lines


def table(rows: list[Row], minutes: float) -> str:
    """The comparison: every pairing's rows per graph size, the ratios' summary, and what the figures mean."""
    head = (f"{'nodes':>5}  {'fuzzer':<28} {'loop tests/min':>14} {'tests':>7} {'reports saved':>14} "
            f"{'failing tests':>14}  notes")
    lines = [head, "-" * len(head)]
    for k, (nodes, pairing, ours, theirs) in enumerate(rows):
        if k and rows[k - 1][0] != nodes:
            lines.append("")
        lines += pairing_lines(nodes, pairing, ours, theirs)
    lines.append("")
    ratios = summary(rows)
    lines += ratios + ([""] if ratios else [])
    lines.append(f"{minutes:g} min for each side of each pairing, convsmith and NNSmith one after the other in "
                 f"alternating slices, never at once, on {CORES} cores. NNSmith's processes at once each have their "
                 "own seed and folder; their rates are added. Other engineers' jobs may run on this machine at the "
                 "same time, so the rates are indicative, not exact.")
    lines.append("reports saved: convsmith's deduplicated bug case folders; NNSmith's report folders, one per "
                 "failing model (not deduplicated). failing tests: tests (models) that were counted as a bug.")
    lines.append("exporter: the same torch.onnx code on both sides; convsmith imports ONNX Runtime with pybind11 "
                 "internals of its own, NNSmith's process shares torch's, whose exports then run slower "
                 "(bench/pybind_internals.py).")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    """The command line, checked: flags that would not apply are an error rather than ignored."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0, help="time budget of each side of each pairing "
                        "(default 2)")
    parser.add_argument("--nodes", default="5,10", help="comma-separated graph sizes, operators per graph")
    parser.add_argument("--pairing", choices=("per-core", "both-cores", "both"), default="both",
                        help="per-core: 1 convsmith worker without a feeder against 1 NNSmith process (the ratio to "
                        "quote); both-cores: convsmith's default on the whole machine against one NNSmith process "
                        "per core at once; both (default)")
    parser.add_argument("--workers", type=int, help="the both-cores pairing's convsmith workers (default: convsmith "
                        "fuzz's, one per core; the per-core side always has 1)")
    parser.add_argument("--prepare-ahead", action=argparse.BooleanOptionalAction, default=None,
                        help="feeder processes on or off in the both-cores pairing's convsmith side (default: "
                        "convsmith fuzz's, on where the CPU has a core for each; the per-core side never has one)")
    parser.add_argument("--memory-gb", type=float, default=8.0, help="NNSmith's address-space cap, per process")
    parser.add_argument("--out", type=Path, help="folder for both sides' campaigns (default: a temporary one)")
    parser.add_argument("--skip-nnsmith", action="store_true", help="convsmith only (no .venv-nnsmith needed)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="each side's --minutes are split into this many slices, run alternately (default 3)")
    parser.add_argument("--warmup-s", type=float, default=20.0,
                        help="a short run of each tool first, untimed, so that both start with warm caches")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.pairing == "per-core" and (args.workers is not None or args.prepare_ahead is not None):
        # Silently ignored flags would leave the reader believing the per-core side ran as they asked.
        parser.error("--workers and --[no-]prepare-ahead set the both-cores pairing's convsmith side; the per-core "
                     "side always runs 1 worker without a feeder")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file: give a new or empty folder")
    if args.out is not None and args.out.exists() and any(args.out.iterdir()):
        # Each slice resumes the campaign in its folder: an earlier run's sessions would be counted with this one's.
        parser.error(f"--out {args.out} is not empty: give a new or empty folder")
    return args


def warm_up(seconds: float, nodes: int, pairing: Pairing, out: Path, memory_gb: float, nnsmith: bool) -> None:
    """An untimed run of each tool: their probes and caches are built before anything is measured."""
    print(f"compare: warming both tools up ({seconds:g} s each, not counted: NNSmith builds its operator probe on "
          "its first run, convsmith its probe and caches)", flush=True)
    run_convsmith(seconds / 60, nodes, pairing, out / "convsmith-warmup")
    if not nnsmith:
        return
    # One process: NNSmith's loops at once later find its probe cached rather than build it side by side. Its probe
    # failed once here (an InternalError, nothing cached), so a failed warm-up is tried once more.
    for attempt in (1, 2):
        run = nnsmith_loop.run_loop(seconds / 60, nodes, out / f"nnsmith-warmup-{attempt}", memory_gb)
        if run["returncode"] == 0:
            return
        print(f"compare: NNSmith's warm-up exited with status {run['returncode']} (see {run['out']}/console.txt)"
              + ("; once more" if attempt == 1 else "; going on: the first measured run may build its probe"),
              flush=True)


def measure_size(nodes: int, chosen: list[Pairing], args: argparse.Namespace, out: Path) -> list[Row]:
    """Every chosen pairing at one graph size, in alternating slices; one row per pairing."""
    slice_min = args.minutes / args.rounds
    ours: dict[str, dict] = {}
    theirs: dict[str, list[list[dict]]] = {p.name: [] for p in chosen}
    for r in range(args.rounds):  # alternating, so that a slow spell of the machine falls on both tools
        for pairing in chosen:
            step = f"{nodes} nodes, {pairing.title}, round {r + 1} of {args.rounds}"
            print(f"compare: convsmith, {step} ...", flush=True)
            ours[pairing.name] = run_convsmith(slice_min, nodes, pairing, out / f"convsmith-{pairing.name}-{nodes}")
            if not args.skip_nnsmith:
                print(f"compare: nnsmith, {step}, {pairing.processes} process(es) ...", flush=True)
                theirs[pairing.name].append(run_nnsmith(slice_min, nodes, pairing,
                                                        out / f"nnsmith-{pairing.name}-{nodes}-{r + 1}",
                                                        args.memory_gb))
    rows: list[Row] = []
    for pairing in chosen:
        figures = at_once(theirs[pairing.name]) if theirs[pairing.name] else None
        for k, process in enumerate((figures or {}).get("processes", [])):
            seeds = ", ".join(str(seed) for seed in process["seeds"])
            print(f"compare: nnsmith, {nodes} nodes, {pairing.title}, process {k + 1} of {pairing.processes} "
                  f"(seeds {seeds}):", flush=True)
            print(nnsmith_loop.describe(process), flush=True)
        rows.append((nodes, pairing, ours[pairing.name], figures))
    return rows


def main() -> int:
    args = parse_args()
    sizes = [int(n) for n in args.nodes.split(",") if n.strip()]
    chosen = pairings(args.pairing, args.workers, args.prepare_ahead)
    out = args.out or Path(tempfile.mkdtemp(prefix="compare-nnsmith-"))
    print(f"compare: {args.minutes:g} min per side of each pairing ({', '.join(p.title for p in chosen)}), "
          f"nodes {sizes}, output in {out}", flush=True)
    if not args.skip_nnsmith and not (nnsmith_loop.VENV / "bin" / "python").exists():
        print(f"compare: {nnsmith_loop.VENV} is missing: run `bash bench/nnsmith_env.sh` (or pass --skip-nnsmith)")
        return 2
    if args.warmup_s > 0:
        warm_up(args.warmup_s, sizes[0], chosen[0], out, args.memory_gb, not args.skip_nnsmith)
    rows = [row for nodes in sizes for row in measure_size(nodes, chosen, args, out)]
    print()
    print(table(rows, args.minutes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
