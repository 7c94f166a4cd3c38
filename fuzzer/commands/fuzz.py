"""`convsmith fuzz`: a campaign of isolated workers, a SQLite database and deduplicated case folders."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from fuzzer.campaign.budget import process_started
from fuzzer.campaign.db import DB_NAME, CampaignDB, open_campaign
from fuzzer.campaign.lock import campaign_lock
from fuzzer.campaign.loop import Campaign
from fuzzer.campaign.policy.novelty import AVOID_PROBABILITY, HITS_TO_DEMOTE
from fuzzer.campaign.progress import Progress, format_summary, summarize
from fuzzer.campaign.sources import MIX, SOURCES, ZOO_SHARE, SourceKind
from fuzzer.campaign.spec import LOG_DIR, SCRIPT_SHARE, CampaignSpec, case_folders
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.campaign.zoo_unit import ZOO_MEMORY_MB, ZOO_TIMEOUT_S, takes_zoo_models, zoo_entries
from fuzzer.commands.flags import (
    DEFAULT_CORPUS,
    add_generator_arguments,
    duration,
    generator_options,
    positive_int,
)
from fuzzer.commands.fuzz_flags import (
    choose_converters,
    known_unsupported,
    never_generated,
    pinned_options,
    prepare_ahead,
    prepare_out,
    share,
    value_strategies,
)
from fuzzer.converters import DEFAULT_REGISTRY, load_registry
from fuzzer.support.confine import DEFAULT_MEMORY_MB
from fuzzer.support.device import require_device
from fuzzer.support.errors import CannotRun, Exit, UsageError
from fuzzer.support.files import recover_interrupted_writes
from fuzzer.triage.folders import write_root_causes
from fuzzer.triage.text import format_triage
from fuzzer.triage.view import triage
from generators.values import ValueStrategy
from generators.zoo import ZooEntry

NAME = "fuzz"
HELP = "run a fuzzing campaign: isolated workers, a campaign database, one case folder per distinct bug"


GRAPH_TIMEOUT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--time", type=duration, metavar="DURATION",
                        help="time budget of this session from its start, e.g. 90s, 10m, 2h: it tests until the cases "
                             "found need the rest to reduce and ends within a minute of it (cases left unreduced are "
                             "reduced on --resume; default: until done or Ctrl-C)")
    parser.add_argument("--tests", type=positive_int, help="graphs to test over the whole campaign (each by every "
                        "converter; default: no limit)")
    parser.add_argument("--seed", type=int, default=0, help="seed base: graph i uses seed base + i")
    parser.add_argument("--source", choices=SOURCES, default=MIX,
                        help="what each unit tests: a generated graph, or a zoo architecture the seed picks (built "
                             "with weights and inputs from the seed; `convsmith zoo` lists them); mix (default): a "
                             f"zoo architecture on {ZOO_SHARE:.0%}% of units where the zoo builds, graphs on the rest")
    parser.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--converters", help="comma-separated converters (default: every available one)")
    parser.add_argument("--script-share", type=share, default=SCRIPT_SHARE, metavar="F",
                        help="where both exporters run, the share of graphs the TorchScript exporter's own test "
                             f"runs on (default {SCRIPT_SHARE:.2f}: PyTorch keeps that exporter in maintenance; 1 runs "
                             "it on every graph)")
    add_generator_arguments(parser)
    parser.add_argument("--min-nodes", type=positive_int, default=2, help="fewest operators per graph (--nodes is "
                        "the most)")
    parser.add_argument("--device", default="cpu", help="where the source and ONNX Runtime run: cpu or cuda")
    parser.add_argument("--out", type=Path, default=Path("bugs"), help="campaign folder")
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue the campaign in DIR with its options")
    parser.add_argument("--timeout", type=duration, metavar="DURATION",
                        help=f"time per converter test before it counts as a hang (default: {GRAPH_TIMEOUT_S:.0f}s; "
                             f"{ZOO_TIMEOUT_S:.0f}s for a zoo unit)")
    parser.add_argument("--memory-mb", type=positive_int, help="memory per worker before out-of-memory (default: "
                        f"{DEFAULT_MEMORY_MB}; {ZOO_MEMORY_MB} for a zoo unit)")
    parser.add_argument("--avoid-unsupported", nargs="?", const="torch-onnx-script", metavar="CONVERTERS",
                        help="skip a converter's test when its graph holds an (operator, dtype) pair that "
                             "`convsmith probe` found that converter (or, for an ONNX tool, its upstream exporter) "
                             "does not support, counted as unsupported; the graph still goes to every other "
                             "converter (without a value: torch-onnx-script)")
    parser.add_argument("--settings", choices=("vary", "default"), default="vary",
                        help="vary: each test draws its converter's options (opsets, upstream exporter, optimization "
                             "level, folding...) from their real range; default: every test uses the defaults")
    parser.add_argument("--option", action="append", default=[], metavar="CONVERTER.KEY=JSON",
                        help="pin one converter option for the whole campaign, e.g. --option ort-optimizer.level=basic "
                             "(repeatable)")
    parser.add_argument("--values", type=value_strategies, default=tuple(v.value for v in ValueStrategy),
                        metavar="STRATEGIES", help="how tests draw input values, comma-separated: uniform (in a small "
                        "range), special (signed zeros, exact integers, halves, near overflow and underflow, integer "
                        "extremes mixed in), large (large magnitudes); default: all, drawn per test")
    parser.add_argument("--demote-known", action=argparse.BooleanOptionalAction, default=True,
                        help="generate less of the (operator, dtype) pairs behind a bug this campaign has hit "
                             f"{HITS_TO_DEMOTE} times (each is left out of {AVOID_PROBABILITY * 100:.0f}%% of later "
                             "graphs), so a long campaign keeps finding new root causes (default: on)")
    parser.add_argument("--prepare-ahead", action=argparse.BooleanOptionalAction, default=None,
                        help="give each worker a feeder process that generates the next graph while the worker "
                             "converts (default: on where the CPU has a core for each worker's feeder)")
    parser.add_argument("--no-reduce", action="store_true", help="do not minimize new bug cases in the background")
    parser.add_argument("--reduce-time", type=duration, default=60.0, metavar="DURATION",
                        help="time to minimize each new bug case (seconds)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="where the workers run: local processes, or Ray actors across a cluster (make install "
                        "RAY=1; docs/scale.md)")
    parser.add_argument("--address", metavar="HOST:PORT", help="the Ray cluster --engine ray joins (default: one "
                        "started on this machine)")
    parser.add_argument("--bisect", action="store_true", help="bisect each new root cause's reduced case across "
                        "releases of the blamed library (`convsmith bisect`), in one background process at the "
                        "lowest priority, logged in .logs/bisect.log")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="root causes of these cases are reported "
                        "as known")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY, help="MODULE:ATTR of the converter registry "
                        "(plugins and tests)")
    parser.add_argument("--log-interval", type=float, default=60.0, help=argparse.SUPPRESS)


def new_campaign(args: argparse.Namespace) -> tuple[Path, CampaignDB, CampaignSpec]:
    """Check every flag, then make the campaign folder and its database (nothing is made on bad input)."""
    gen = generator_options(args)
    if args.min_nodes > args.nodes:
        raise UsageError(f"--min-nodes {args.min_nodes} is above --nodes {args.nodes}")
    require_device(args.device, f"--device {args.device}")
    zoo = args.source == SourceKind.ZOO.value
    if zoo and not zoo_entries():
        raise CannotRun("--source zoo: no zoo entry builds here; install convsmith's zoo extra (make install)")
    converters, skipped = choose_converters(args.registry, args.converters)
    # A campaign narrowed to some operators (--ops) asks for graphs of them: its mix holds no zoo architecture.
    zoo_share = 0.0 if gen.include_ops else mix_zoo_share(args.source, args.registry, converters, zoo_entries())
    skip = known_unsupported(args.avoid_unsupported)
    pinned = pinned_options(args.option, args.registry)
    prepare_out(args.out)
    for line in skipped:
        print(line, file=sys.stderr)
    worker = WorkerConfig(out_dir=str(args.out), log_dir=str(args.out / LOG_DIR), registry=args.registry,
                          min_nodes=args.min_nodes, nodes=gen.nodes, include_ops=gen.include_ops,
                          exclude_ops=gen.exclude_ops, dtypes=tuple(d.value for d in gen.dtypes),
                          max_numel=gen.max_numel, avoid_pairs=never_generated(skip, converters),
                          skip_pairs=skip,
                          timeout_s=args.timeout or (ZOO_TIMEOUT_S if zoo else GRAPH_TIMEOUT_S),
                          memory_mb=args.memory_mb or (ZOO_MEMORY_MB if zoo else DEFAULT_MEMORY_MB),
                          zoo_timeout_s=(args.timeout or ZOO_TIMEOUT_S) if zoo_share else None,
                          zoo_memory_mb=(args.memory_mb or ZOO_MEMORY_MB) if zoo_share else None, device=args.device,
                          converter_options=pinned, vary_settings=args.settings == "vary",
                          prepare_ahead=prepare_ahead(args.prepare_ahead, args.workers, args.device)
                          and not zoo,  # a feeder generates graphs ahead: a zoo unit has none
                          values=args.values, demote_known=args.demote_known, converters=converters,
                          source=args.source, zoo_share=zoo_share)
    spec = CampaignSpec(args.seed, converters, worker, args.tests, args.script_share)
    db = CampaignDB(args.out / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    return args.out, db, spec


def mix_zoo_share(source: str, registry: str, converters: tuple[str, ...], entries: Sequence[ZooEntry]) -> float:
    """The share of a mixed campaign's units that test a zoo architecture: ZOO_SHARE, but none where none of the zoo
    `entries` builds here (the zoo extra is not installed) or none of the campaign's converters takes their models."""
    if source != MIX or not entries or not takes_zoo_models(load_registry(registry), converters, entries):
        return 0.0
    return ZOO_SHARE


def resumed_campaign(args: argparse.Namespace) -> tuple[Path, CampaignDB, CampaignSpec]:
    out = args.resume
    db = open_campaign(out)
    data = db.get_meta("spec")
    if data is None:
        raise UsageError(f"{out}: the campaign database records no options")
    spec = CampaignSpec.from_json(data, out)
    require_device(spec.worker.device, f"{out}: --device {spec.worker.device}")  # it runs where it started
    if args.tests is not None:
        spec = dataclasses.replace(spec, max_tests=args.tests)
        db.set_meta("spec", spec.to_json())
    return out, db, spec


def require_engine(args: argparse.Namespace) -> None:
    """--engine ray needs Ray installed; --address is Ray's."""
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address is the Ray cluster of --engine ray")
    if args.engine == "ray" and importlib.util.find_spec("ray") is None:
        raise UsageError("--engine ray needs Ray: make install RAY=1 (or pip install '.[ray]')")


def run(args: argparse.Namespace) -> int:
    require_engine(args)
    with contextlib.ExitStack() as held:
        if args.resume:
            held.enter_context(campaign_lock(args.resume))
            out, db, spec = resumed_campaign(args)
        else:
            out, db, spec = new_campaign(args)
            held.enter_context(campaign_lock(out))
        # Each case folder too: its reduced case is written into it by a reducer the campaign may have lost.
        restored = recover_interrupted_writes(out)
        restored += [name for case in case_folders(out) for name in recover_interrupted_writes(case)]
        if restored:
            print(f"convsmith fuzz: put back {', '.join(restored)} (moved aside by a write that was killed)",
                  file=sys.stderr)
        return run_locked(args, out, db, spec)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_locked(args: argparse.Namespace, out: Path, db: CampaignDB, spec: CampaignSpec) -> int:
    """Run the campaign in `out`, whose lock this process holds, then triage it and print the summaries."""
    progress = Progress(interval_s=args.log_interval, total=None)
    campaign = Campaign(out, spec, db, args.workers, args.time, progress,
                        reduce_budget_s=None if args.no_reduce else args.reduce_time, yield_cpu=True,
                        started=process_started(), bisect=args.bisect, engine=args.engine,
                        ray_address=args.address, show_libraries=args.verbose)
    # `kill PID` (a service manager's stop, a batch system's time limit) stops the campaign as Ctrl-C does: the tests in
    # flight are given up, the demotion tally and the session are recorded, and --resume goes on from there.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        status = campaign.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        print(format_summary(summarize(db)))
        result = triage(out, db, args.corpus)
        if not campaign.disk_full:
            write_root_causes(out, result)
        print(format_triage(result, shown=10))
        db.close()
    if campaign.disk_full:
        print(f"convsmith fuzz: {campaign.disk_full}; the campaign stopped with every test recorded so far kept: free "
              f"some space, then continue it with --resume {out}", file=sys.stderr)
        return Exit.CANNOT_RUN
    if campaign.reducer is not None:
        print(campaign.reducer.summary())
    if campaign.time_line() is not None:
        print(campaign.time_line())
    print(f"campaign {status}: {out}" + (f" (continue with --resume {out})" if status != "finished" else ""))
    return 130 if status == "interrupted" else Exit.OK
