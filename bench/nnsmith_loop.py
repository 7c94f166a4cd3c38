"""NNSmith's own fuzz loop (PyPI `nnsmith`, `nnsmith.cli.fuzz`) on ONNX models run by ONNX Runtime, for comparison
with convsmith's campaign (bench/compare_nnsmith.py). Prints models tested per minute and the bug reports it saved.

    python bench/nnsmith_loop.py [--minutes 2] [--nodes 5] [--out DIR] [--memory-gb 8] [--seed N]

Any Python runs this script; it runs NNSmith inside `.venv-nnsmith` (made by `bash bench/nnsmith_env.sh`). There the
same file, with `--child`, is the launcher: before NNSmith is imported it caps the address space (NNSmith asks for
gigabytes of weights otherwise) and patches two things newer releases removed or changed:
  - `torch.onnx.export` defaults to `dynamo=True` since torch 2.9; NNSmith calls it without `dynamo`, so the
    launcher makes `dynamo=False` (the TorchScript exporter) the default;
  - `onnx._serialize` is gone from onnx; NNSmith's ONNX Runtime backend calls it, so it is restored as
    `proto.SerializeToString()`.

What NNSmith records: its hydra job log (`<out>/hydra/fuzz.log`) gets one `Timing: gen ..., eval ...` line per model
it generated and tested (one ONNX model through ONNX Runtime, compared with the PyTorch oracle), errors for models it
failed to make, and `Total N testcases generated.` / `Total N bugs found.` at the end of the time budget; each bug is a
report folder `<out>/fuzz/bug-*`. The rate is models over the loop's span in the log (first to last line of the loop,
so NNSmith's start-up, e.g. its cached operator/dtype probe, is not counted, as in convsmith's own figure).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-nnsmith"
# How long past its budget a loop may run before it is killed: NNSmith's generator has no time limit, and one model
# took 10 minutes of a 40-second slice here. The model in progress is then counted as a stall (shown apart).
KILL_AFTER_S = 120


def _malloc_env() -> dict[str, str]:
    """convsmith's malloc settings, imported here only: this file also runs inside .venv-nnsmith."""
    if str(ROOT) not in sys.path:  # run as a script; compare_nnsmith.py has it on the path already
        sys.path.insert(0, str(ROOT))
    from generators.solver import KEEP_FREED_MEMORY_ENV

    return KEEP_FREED_MEMORY_ENV


# ---- the launcher (runs inside .venv-nnsmith) --------------------------------------------------------------

def child(memory_gb: float, overrides: list[str]) -> None:
    import resource

    limit = int(memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    import warnings

    import onnx
    import torch
    import torch.onnx

    warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export", category=DeprecationWarning)

    if not hasattr(onnx, "_serialize"):
        onnx._serialize = lambda proto: proto.SerializeToString()

    original_export = torch.onnx.export

    def export(*args, **kwargs):
        kwargs.setdefault("dynamo", False)
        return original_export(*args, **kwargs)

    export.__wrapped__ = original_export
    torch.onnx.export = export

    from nnsmith.cli import fuzz  # imported only now: the patches above are in place

    sys.argv = ["nnsmith.cli.fuzz", *overrides]
    fuzz.main()


# ---- the parent: start, wait, count ------------------------------------------------------------------------

STALL_S = 10.0  # one model taking this long (NNSmith's z3 without a time limit) is a stall, shown apart
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[(\w[^\]]*)\]\[(\w+)\] - (.*)$")


def parse_log(path: Path, killed_at: float | None = None) -> dict:
    """Counts from NNSmith's hydra job log (see the module doc); `killed_at`: when the loop was killed mid-model,
    that model counts as a stall from the log's last line to the kill, as does one it failed to make after STALL_S."""
    models = failed_make = 0
    totals: dict[str, int] = {}
    loop_start = loop_end = first = None
    gen_s = eval_s = stall_s = 0.0
    stalls = stalled_models = 0  # stalled_models: the stalls among `models` (not failed to make, not killed)
    if not path.exists():
        return {"models": 0, "failed_make": 0, "loop_s": 0.0, "stalls": 0, "stalled_models": 0, "stall_s": 0.0,
                "totals": {}, "loop_start": None, "loop_end": None}
    for line in path.read_text(errors="replace").splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        when = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        first = first if first is not None else when
        message = m.group(4)
        if message.startswith("Test success info supressed"):  # the last line before the loop starts
            loop_start = when
        elif message.startswith("Timing:"):
            models += 1
            loop_end = when
            took = {key: float(ms) / 1000 for key, ms in re.findall(r"(\w+): ([\d.]+)ms", message)}
            gen_s += took.get("gen", 0.0)
            eval_s += took.get("eval", 0.0)
            spent = took.get("gen", 0.0) + took.get("eval", 0.0)
            if spent >= STALL_S:
                stalls += 1
                stalled_models += 1
                stall_s += spent
        elif message.startswith("`make_testcase` failed"):
            failed_make += 1
            # Its line has no timing: the time since the loop's previous line is the model's. One such model (a
            # MemoryError under the address-space cap after 29 s) ran a 24-second loop 28 s past its budget.
            previous = loop_end if loop_end is not None else loop_start
            if previous is not None and when - previous >= STALL_S:
                stalls += 1
                stall_s += when - previous
            loop_end = when
        elif t := re.match(r"Total (\d+) (testcases generated|bugs found|failed to make testcases)", message):
            totals[t.group(2)] = int(t.group(1))
            loop_end = when
    if loop_start is None:
        loop_start = first
    if killed_at is not None and loop_end is not None:
        stalls += 1
        stall_s += max(killed_at - loop_end, 0.0)
        loop_end = max(killed_at, loop_end)
    loop_s = (loop_end - loop_start) if loop_start is not None and loop_end is not None else 0.0
    # The loop's ends on the clock: compare_nnsmith.py checks that loops run at the same time really overlapped.
    return {"models": models, "failed_make": failed_make, "loop_s": loop_s, "gen_s": gen_s, "eval_s": eval_s,
            "stalls": stalls, "stalled_models": stalled_models, "stall_s": min(stall_s, loop_s), "totals": totals,
            "loop_start": loop_start, "loop_end": loop_end}


def count_reports(root: Path) -> tuple[list[Path], dict[str, int], set[str]]:
    """NNSmith's report folders under `root`, their count per kind (symptom and stage, from the folder name) and
    the distinct exception messages among them (an exception's last line, numbers and quoted names left out)."""
    reports = sorted(root.glob("bug-*")) if root.exists() else []
    by_symptom: dict[str, int] = {}
    messages = set()
    for report in reports:
        kind = re.sub(r"-\d+$", "", report.name.removeprefix("bug-"))
        by_symptom[kind] = by_symptom.get(kind, 0) + 1
        if "EXCEPTION" in kind:
            err = report / "err.log"
            tail = [ln for ln in err.read_text(errors="replace").splitlines() if ln.strip()] if err.exists() else []
            messages.add(re.sub(r"\d+", "#", re.sub(r"'[^']*'", "'...'", tail[-1])) if tail else kind)
    return reports, by_symptom, messages


def run_loop(minutes: float, nodes: int, out: Path | None = None, memory_gb: float = 8.0, seed: int | None = None,
             python: Path | None = None, quiet: bool = True) -> dict:
    """Runs NNSmith's fuzz loop for `minutes` and returns its figures (models, models_per_min, reports, ...)."""
    python = python or VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: run `bash bench/nnsmith_env.sh` first")
    out = out or Path(tempfile.mkdtemp(prefix="nnsmith-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    budget_s = max(int(round(minutes * 60)), 1)
    overrides = [
        "model.type=onnx",
        "backend.type=onnxruntime",
        "backend.target=cpu",
        f"mgen.max_nodes={nodes}",
        f"fuzz.time={budget_s}s",
        f"fuzz.root={out / 'fuzz'}",
        f"hydra.run.dir={out / 'hydra'}",
    ]
    if seed is not None:
        overrides.append(f"fuzz.seed={seed}")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.setdefault("OMP_NUM_THREADS", "1")  # NNSmith runs ORT on one intra-op thread; keep torch alike
    env.update(_malloc_env())  # convsmith's workers keep freed memory (generators/solver.py): NNSmith too
    cmd = [str(python), str(Path(__file__).resolve()), "--child", "--memory-gb", str(memory_gb), "--", *overrides]
    console = out / "console.txt"
    started = time.time()
    killed_at = None
    with console.open("w") as sink:
        try:
            returncode = subprocess.run(cmd, stdout=sink if quiet else None,
                                        stderr=subprocess.STDOUT if quiet else None, env=env, cwd=out,
                                        timeout=budget_s + KILL_AFTER_S).returncode
        except subprocess.TimeoutExpired:  # a model stalled past the budget: killed, and counted as a stall
            killed_at, returncode = time.time(), -9
    wall = time.time() - started
    log = parse_log(out / "hydra" / "fuzz.log", killed_at)
    reports, by_symptom, messages = count_reports(out / "fuzz")
    loop_s = log["loop_s"] or wall
    return {
        "returncode": returncode,
        "killed": int(killed_at is not None),
        "out": str(out),
        "nodes": nodes,
        "seed": seed,
        "budget_s": budget_s,
        "loop_start": log["loop_start"],
        "loop_end": log["loop_end"],
        "wall_s": wall,
        "loop_s": loop_s,
        "startup_s": max(wall - loop_s, 0.0),
        "models": log["models"],
        "models_per_min": log["models"] / (loop_s / 60) if loop_s > 0 else 0.0,
        # The rate without the models that stalled (and their time): one stall can take most of a short loop.
        "stalls": log["stalls"],
        "stalled_models": log["stalled_models"],
        "stall_s": log["stall_s"],
        "unstalled_per_min": (log["models"] - log["stalled_models"]) / ((loop_s - log["stall_s"]) / 60)
        if loop_s > log["stall_s"] else 0.0,
        "failed_make": log["failed_make"],
        "reports": len(reports),
        "reports_by_kind": by_symptom,
        "distinct_exceptions": len(messages),
        "exception_messages": sorted(messages),
        "totals": log["totals"],
        "gen_share": log.get("gen_s", 0.0) / loop_s if loop_s > 0 else 0.0,
        "eval_share": log.get("eval_s", 0.0) / loop_s if loop_s > 0 else 0.0,
    }


def describe(r: dict) -> str:
    lines = [f"nnsmith: {r['models']} models in {r['loop_s']:.0f} s of loop ({r['nodes']} nodes max): "
             f"{r['models_per_min']:.1f} models/min; {r['reports']} bug reports saved; "
             f"{r['failed_make']} models failed to make",
             *([f"nnsmith: {r['stalls']} model(s) took over {STALL_S:g} s each ({r['stall_s']:.0f} s in all); "
                f"without them {r['unstalled_per_min']:.1f} models/min"] if r.get("stalls") else []),
             "nnsmith: reports (not deduplicated) by kind: "
             + (", ".join(f"{k} {n}" for k, n in sorted(r["reports_by_kind"].items())) or "none")
             + f"; {r['distinct_exceptions']} distinct exception messages",
             f"nnsmith: start-up {r['startup_s']:.0f} s (not counted); exit status {r['returncode']}; "
             f"log and reports in {r['out']}"]
    if r.get("killed"):
        lines.append(f"nnsmith: {r['killed']} loop(s) killed {KILL_AFTER_S} s past the budget, in a stalled model "
                     "(counted among the stalls)")
    elif r["returncode"] != 0:
        lines.append(f"nnsmith: the loop exited with status {r['returncode']}: see {r['out']}/console.txt")
    return "\n".join(lines)


def main() -> int:
    if "--child" in sys.argv:
        at = sys.argv.index("--")
        own = argparse.ArgumentParser()
        own.add_argument("--child", action="store_true")
        own.add_argument("--memory-gb", type=float, default=8.0)
        args = own.parse_args(sys.argv[1:at])
        child(args.memory_gb, sys.argv[at + 1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--memory-gb", type=float, default=8.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--verbose", action="store_true", help="show NNSmith's console instead of keeping it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run_loop(args.minutes, args.nodes, args.out, args.memory_gb, args.seed, quiet=not args.verbose)
    print(json.dumps(result, indent=1) if args.json else describe(result))
    return 0 if result["models"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
