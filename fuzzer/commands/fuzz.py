"""`convsmith fuzz`: a campaign of isolated workers, a SQLite database and deduplicated case folders."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fuzzer.campaign.db import DB_NAME, CampaignDB, open_campaign
from fuzzer.campaign.loop import LOG_DIR, Campaign, CampaignSpec
from fuzzer.campaign.probe import load_probe
from fuzzer.campaign.progress import Progress, format_summary, summarize
from fuzzer.campaign.worker import DEFAULT_REGISTRY, WorkerConfig, load_registry
from fuzzer.commands.flags import _names, add_generator_arguments, generator_options
from fuzzer.commands.probe import DEFAULT_CACHE as DEFAULT_PROBE_CACHE
from fuzzer.converters import CONVERTERS
from fuzzer.support.device import require_device
from fuzzer.support.errors import UsageError

NAME = "fuzz"
HELP = "run a fuzzing campaign: isolated workers, a campaign database, one case folder per distinct bug"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, help="time budget of this session (default: until done or Ctrl-C)")
    parser.add_argument("--tests", type=int, help="graphs to test over the whole campaign (each by every converter)")
    parser.add_argument("--seed", type=int, default=0, help="seed base: graph i uses seed base + i (default 0)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes (default: cores)")
    parser.add_argument("--converters", help="comma-separated converters (default: every available one)")
    add_generator_arguments(parser)
    parser.add_argument("--min-nodes", type=int, default=2, help="fewest operators per graph (default 2; --nodes is "
                        "the most)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the source and ORT run")
    parser.add_argument("--out", type=Path, default=Path("bugs"), help="campaign folder (default bugs/)")
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue the campaign in DIR with its options")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per converter test before HANG")
    parser.add_argument("--memory-mb", type=int, default=4096, help="memory per worker before OUT_OF_MEMORY")
    parser.add_argument("--avoid-unsupported", nargs="?", const="torch-onnx-script", metavar="CONVERTERS",
                        help="never generate the (operator, dtype) pairs that `convsmith probe` found unsupported by "
                             "these converters (default torch-onnx-script, the exporter most converters start from)")
    parser.add_argument("--no-reduce", action="store_true", help="do not minimize new bug cases in the background")
    parser.add_argument("--reduce-budget", type=float, default=60.0, help="seconds to minimize each new bug case")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY, help="MODULE:ATTR of the converter registry "
                        "(plugins and tests)")
    parser.add_argument("--log-interval", type=float, default=60.0, help=argparse.SUPPRESS)


def choose_converters(registry_ref: str, text: str | None, check_availability: bool = True) -> tuple[str, ...]:
    registry = load_registry(registry_ref)
    wanted = _names(text)
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        raise UsageError(f"unknown converter(s): {', '.join(unknown)}; known: {', '.join(registry)}")
    if not check_availability:
        return wanted
    chosen = []
    for name in wanted or tuple(registry):
        ok, reason = registry[name].availability()
        if ok:
            chosen.append(name)
        elif wanted:
            raise UsageError(f"converter {name} is unavailable: {reason}")
        else:
            print(f"convsmith fuzz: skipping {name} ({reason})", file=sys.stderr)
    if not chosen:
        raise UsageError("no converter is available")
    return tuple(chosen)


def prepare_out(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write to the output folder {out}: {exc.strerror or exc}") from None
    if (out / DB_NAME).exists():
        raise UsageError(f"{out} already holds a campaign; continue it with --resume {out} or choose another --out")


def avoided_pairs(converters: str | None) -> tuple[tuple[str, str], ...]:
    """The (op, dtype) pairs the cached probe of `converters` found unsupported; UsageError without a cache."""
    if not converters:
        return ()
    names = [c.strip() for c in converters.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONVERTERS]
    if unknown:
        raise UsageError(f"--avoid-unsupported: unknown converter(s) {', '.join(unknown)}")
    table = load_probe(DEFAULT_PROBE_CACHE, names)
    if table is None:
        raise UsageError(f"--avoid-unsupported: no probe cache for {', '.join(names)} at these library versions; "
                         f"run `convsmith probe --converters {','.join(names)}` first")
    return tuple(sorted(set().union(*(table.unsupported(c) for c in names))))


def new_campaign(args: argparse.Namespace) -> tuple[Path, CampaignDB, CampaignSpec]:
    gen = generator_options(args)
    if args.min_nodes < 1 or args.workers < 1 or args.timeout <= 0:
        raise UsageError("--min-nodes, --workers and --timeout must be positive")
    out = args.out
    choose_converters(args.registry, args.converters, check_availability=False)  # unknown names first
    avoid = avoided_pairs(args.avoid_unsupported)
    prepare_out(out)
    converters = choose_converters(args.registry, args.converters)
    worker = WorkerConfig(out_dir=str(out), log_dir=str(out / LOG_DIR), registry=args.registry,
                          min_nodes=args.min_nodes, nodes=gen.nodes, include_ops=gen.include_ops,
                          exclude_ops=gen.exclude_ops, dtypes=tuple(d.value for d in gen.dtypes),
                          max_numel=gen.max_numel, avoid_pairs=avoid,
                          timeout_s=args.timeout, memory_mb=args.memory_mb, device=args.device)
    spec = CampaignSpec(args.seed, converters, worker, args.tests)
    db = CampaignDB(out / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    return out, db, spec


def resumed_campaign(args: argparse.Namespace) -> tuple[Path, CampaignDB, CampaignSpec]:
    out = args.resume
    db = open_campaign(out)
    data = db.get_meta("spec")
    if data is None:
        raise UsageError(f"{out}: the campaign database records no options")
    spec = CampaignSpec.from_json(data, out)
    if args.tests is not None:
        spec = CampaignSpec(spec.seed_base, spec.converters, spec.worker, args.tests)
        db.set_meta("spec", spec.to_json())
    return out, db, spec


def run(args: argparse.Namespace) -> int:
    if args.minutes is not None and args.minutes <= 0 or args.tests is not None and args.tests < 0:
        raise UsageError("--minutes and --tests must be positive")
    if args.reduce_budget <= 0:
        raise UsageError("--reduce-budget must be positive")
    if not args.resume:  # before the campaign folder is made
        require_device(args.device, f"--device {args.device}")
    out, db, spec = resumed_campaign(args) if args.resume else new_campaign(args)
    if args.resume:  # a resumed campaign runs on the device it was started with
        require_device(spec.worker.device, f"{out}: --device {spec.worker.device}")
    progress = Progress(interval_s=args.log_interval, total=None)
    # `convsmith reduce` replays a case with the standard converters: an injected registry's finds are not reduced.
    reduce = not args.no_reduce and spec.worker.registry == DEFAULT_REGISTRY
    campaign = Campaign(out, spec, db, args.workers, args.minutes, progress,
                        reduce_budget_s=args.reduce_budget if reduce else None)
    try:
        status = campaign.run()
    finally:
        print(format_summary(summarize(db)))
        db.close()
    if campaign.reducer is not None:
        r = campaign.reducer
        print(f"reduction: {r.reduced} new cases minimized, {r.failed} failed (see .logs/reduce.log), "
              f"{len(r.pending)} waiting (minimized on --resume, or by `convsmith reduce CASE`)")
    print(f"campaign {status}: {out}" + (f" (continue with --resume {out})" if status != "finished" else ""))
    return 130 if status == "interrupted" else 0
