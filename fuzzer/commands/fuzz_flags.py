"""What `convsmith fuzz`'s flags become: the converters chosen, the output folder checked, the pairs known
unsupported, pinned converter options, value strategies and whether workers prepare ahead; each a bad-usage line
(UsageError, CannotRun) when the flag is wrong."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from fuzzer.campaign.db import DB_NAME
from fuzzer.campaign.probe import DEFAULT_CACHE as DEFAULT_PROBE_CACHE
from fuzzer.campaign.probe import load_probe
from fuzzer.commands.flags import names
from fuzzer.converters import CONVERTERS, load_registry
from fuzzer.support.errors import CannotRun, UsageError
from generators.values import ValueStrategy


def share(text: str) -> float:
    """A share between 0 and 1 (argparse type): a wrong one is bad usage."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value:g} is not between 0 and 1")
    return value


def choose_converters(registry_ref: str, text: str | None) -> tuple[tuple[str, ...], list[str]]:
    """The converters to run: the named ones (each must be known and available) or every available one; and a
    line for each one skipped."""
    registry = load_registry(registry_ref)
    wanted = names(text)
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        raise UsageError(f"unknown converter(s): {', '.join(unknown)}; known: {', '.join(registry)}")
    chosen, skipped = [], []
    for name in wanted or tuple(registry):
        ok, reason = registry[name].availability()
        if ok:
            chosen.append(name)
        elif wanted:
            raise CannotRun(f"converter {name} is unavailable: {reason}")
        else:
            skipped.append(f"convsmith fuzz: skipping {name} ({reason})")
    if not chosen:
        raise CannotRun("no converter is available")
    return tuple(chosen), skipped


def prepare_out(out: Path) -> None:
    if (out / DB_NAME).exists():
        raise UsageError(f"{out} already holds a campaign; continue it with --resume {out} or choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write to the output folder {out}: {exc.strerror or exc}") from None


def known_unsupported(converters: str | None) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each named converter, the (op, dtype) pairs its cached probe found unsupported; UsageError without a
    cache."""
    if not converters:
        return {}
    wanted = names(converters)
    unknown = [c for c in wanted if c not in CONVERTERS]
    if unknown:
        raise UsageError(f"--avoid-unsupported: unknown converter(s) {', '.join(unknown)}")
    table = load_probe(DEFAULT_PROBE_CACHE, wanted)
    if table is None:
        raise UsageError(f"--avoid-unsupported: no probe cache for {', '.join(wanted)} at these library versions; "
                         f"run `convsmith probe --converters {','.join(wanted)}` first")
    return {c: tuple(sorted(table.unsupported(c))) for c in wanted}


def never_generated(skip: dict[str, tuple[tuple[str, str], ...]], converters: tuple[str, ...]) -> tuple:
    """The pairs no converter of the campaign can take: only those are kept out of the graphs themselves."""
    sets = [set(skip.get(c, ())) for c in converters]
    return tuple(sorted(set.intersection(*sets))) if sets else ()


def pinned_options(pairs: list[str], registry_ref: str) -> dict[str, dict[str, Any]]:
    """--option CONVERTER.KEY=JSON pairs as {converter: {key: value}}, each checked against the converter's options."""
    registry = load_registry(registry_ref)
    pinned: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        target, sep, text = pair.partition("=")
        converter, dot, key = target.partition(".")
        if not sep or not dot or not key:
            raise UsageError(f"--option {pair!r} is not CONVERTER.KEY=VALUE")
        if converter not in registry:
            raise UsageError(f"--option {pair!r}: unknown converter {converter!r}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        pinned.setdefault(converter, {})[key] = value
    for converter, options in pinned.items():
        try:
            registry[converter].options(options)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--option: {converter}: {exc}") from None
    return pinned


def value_strategies(text: str) -> tuple[str, ...]:
    """--values: known strategy names, comma-separated, each once."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    known = {v.value for v in ValueStrategy}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: strategies are {', '.join(sorted(known))}")
    return names


def prepare_ahead(flag: bool | None, workers: int, device: str) -> bool:
    """--prepare-ahead as given; by default on when the CPU has a core for every worker and its feeder (on a
    machine without one the feeder only takes time from another worker)."""
    if device != "cpu":
        if flag:
            raise UsageError(f"--prepare-ahead works with --device cpu only, not {device}")
        return False
    return flag if flag is not None else (os.cpu_count() or 1) >= 2 * workers
