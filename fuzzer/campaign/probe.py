"""Support probe: which (operator, dtype) pairs a converter converts and runs at all, cached per library version.

For each pair a one-node graph is generated (GenOptions(nodes=1, include_ops=(op,), dtypes=...)) and checked
with 1-2 seeds. Documented "not implemented" failures are `unsupported`; the generator can then avoid those
pairs (or aim at them). The cache is one JSON file per converter, keyed by the versions of its libraries and
its options; it is filled incrementally, so an interrupted or time-limited probe resumes where it stopped.
A probe in which nothing works raises: an empty table must never silently disable a converter.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from fuzzer.check.pipeline import CheckOptions, available_converter, run_check
from fuzzer.converters import CONVERTERS
from fuzzer.support.files import atomic_write_text
from generators.dtypes import DType
from generators.generator import single_op_graph
from generators.registry import REGISTRY
from oracles.verdict import Stage, Symptom

DEFAULT_CACHE = Path(".convsmith-cache/probe")
PROBE_VERSION = 1  # bump when the meaning of an entry changes: old caches are then ignored
PROBE_CHECK = CheckOptions(rerun=False, locate=False, culprit=False, input_budget_s=0.3)
OK, UNSUPPORTED, FAILS, SOURCE, NO_GRAPH = "ok", "unsupported", "fails", "source", "no-graph"

CheckFn = Callable[..., Any]  # run_check's signature; tests pass a counting wrapper


class ProbeError(RuntimeError):
    """The probe found nothing that converts (or could not run): never cache or use such a table."""


@dataclass(frozen=True)
class ProbeEntry:
    """One (converter, op, dtype) outcome; signature and message of the first non-ok seed."""

    converter: str
    op: str
    dtype: str
    status: str  # ok, unsupported, fails (converts but a bug shows), source, no-graph
    stage: str = Stage.NONE.value
    signature: str = ""
    message: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.op, self.dtype)


@dataclass(frozen=True)
class ProbeTable:
    """Probe entries of one or more converters and the library versions they were taken with."""

    entries: tuple[ProbeEntry, ...]
    versions: Mapping[str, Mapping[str, str]]

    def of(self, converter: str) -> list[ProbeEntry]:
        return [e for e in self.entries if e.converter == converter]

    def unsupported(self, converter: str) -> frozenset[tuple[str, str]]:
        """(op, dtype) pairs to keep away from this converter (or to aim at, to test its error paths)."""
        return frozenset(e.key for e in self.of(converter) if e.status == UNSUPPORTED)

    def excluded_ops(self, converter: str) -> tuple[str, ...]:
        """Ops unsupported for every dtype probed: GenOptions(exclude_ops=...) material."""
        by_op: dict[str, set[str]] = {}
        for e in self.of(converter):
            if e.status != NO_GRAPH:
                by_op.setdefault(e.op, set()).add(e.status)
        return tuple(sorted(op for op, statuses in by_op.items() if statuses == {UNSUPPORTED}))

    def supported_dtypes(self, converter: str, op: str) -> tuple[DType, ...]:
        return tuple(DType(e.dtype) for e in self.of(converter) if e.op == op and e.status in (OK, FAILS))

    def counts(self, converter: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.of(converter):
            out[e.status] = out.get(e.status, 0) + 1
        return out


# ---- pairs and tiny graphs ----------------------------------------------------------------------------

def probe_pairs(ops: Sequence[str] | None = None, dtypes: Sequence[DType] | None = None) -> list[tuple[str, DType]]:
    """(op, dtype of its first input, or of its output for nullary ops) for every signature of every op."""
    pairs: list[tuple[str, DType]] = []
    for name in ops or list(REGISTRY):
        seen: list[DType] = []
        for sig in REGISTRY[name].sigs:
            d = sig.key_dtype
            if d not in seen and (dtypes is None or d in dtypes):
                seen.append(d)
        pairs += [(name, d) for d in seen]
    return pairs


def probe_pair(converter: str, op: str, dtype: DType, seeds: Sequence[int], options: Any,
               check: CheckFn = run_check) -> ProbeEntry:
    """Unsupported when any seed says so; fails when a seed shows a bug; ok when every seed passes."""
    worst: ProbeEntry | None = None
    made = False
    for seed in seeds:
        graph = single_op_graph(REGISTRY[op], dtype, seed)
        if graph is None:
            continue
        made = True
        verdict = check(graph, seed, converter, options, PROBE_CHECK).verdict
        status = _status(verdict.symptom, verdict.stage)
        entry = ProbeEntry(converter, op, dtype.value, status, verdict.stage.value, verdict.signature,
                           verdict.message[:300])
        if status == UNSUPPORTED:
            return entry
        if status != OK and worst is None:
            worst = entry
    if not made:
        return ProbeEntry(converter, op, dtype.value, NO_GRAPH)
    return worst or ProbeEntry(converter, op, dtype.value, OK)


def _status(symptom: Symptom, stage: Stage) -> str:
    if symptom is Symptom.UNSUPPORTED:
        return UNSUPPORTED
    if symptom in (Symptom.PASS, Symptom.FLAKY):
        return OK
    return SOURCE if stage is Stage.SOURCE else FAILS


# ---- the cache ------------------------------------------------------------------------------------------

def cache_path(cache_dir: Path, converter: str, versions: Mapping[str, str], options: Mapping[str, Any]) -> Path:
    """One file per converter, library versions and options: a new version never reads an old table."""
    key = json.dumps({"probe": PROBE_VERSION, "versions": dict(versions), "options": dict(options)}, sort_keys=True)
    return Path(cache_dir) / f"probe-{converter}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.json"


def _read(path: Path) -> dict[tuple[str, str], ProbeEntry]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if data.get("probe_version") != PROBE_VERSION:
        return {}
    return {(e["op"], e["dtype"]): ProbeEntry(**e) for e in data["entries"]}


def _write(path: Path, converter: str, versions: Mapping[str, str], options: Mapping[str, Any],
           entries: Iterable[ProbeEntry]) -> None:
    """Atomic write (temp file + rename): an interrupted probe never leaves a truncated cache."""
    rows = sorted(entries, key=lambda e: (e.op, e.dtype))
    data = {"probe_version": PROBE_VERSION, "converter": converter, "versions": dict(versions),
            "options": dict(options), "entries": [asdict(e) for e in rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1))


# ---- public entry points -------------------------------------------------------------------------------

def run_probe(cache_dir: str | Path, converters: Sequence[str], ops: Sequence[str] | None = None,
              dtypes: Sequence[DType] | None = None, seeds: Sequence[int] = (0,),
              versions: Mapping[str, Mapping[str, str]] | None = None,
              options: Mapping[str, Any] | None = None, time_limit_s: float | None = None,
              progress: bool = False, check: CheckFn = run_check) -> ProbeTable:
    """Probe the pairs not yet cached for each converter, save after each converter, return the table.

    `versions` overrides the detected library versions per converter (tests simulate upgrades with it);
    `options` maps converter name to its options (defaults otherwise). When `time_limit_s` runs out, what was
    probed is saved and ProbeError says how many pairs remain (run again to resume).
    """
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    pairs = probe_pairs(ops, dtypes)
    entries: list[ProbeEntry] = []
    seen_versions: dict[str, Mapping[str, str]] = {}
    for name in converters:
        conv = available_converter(name)
        opts = conv.options((options or {}).get(name))
        vers = (versions or {}).get(name) or conv.versions()
        seen_versions[name] = vers
        got = _probe_converter(Path(cache_dir), name, vers, opts, pairs, seeds, deadline, progress, check)
        entries += got
    return ProbeTable(tuple(entries), seen_versions)


def _probe_converter(cache_dir: Path, name: str, versions: Mapping[str, str], options: Any,
                     pairs: Sequence[tuple[str, DType]], seeds: Sequence[int], deadline: float | None,
                     progress: bool, check: CheckFn) -> list[ProbeEntry]:
    path = cache_path(cache_dir, name, versions, options.to_json())
    cached = _read(path)
    todo = [(op, d) for op, d in pairs if (op, d.value) not in cached]
    try:
        for op, dtype in tqdm(todo, desc=f"probe {name}", disable=not progress, unit="pair"):
            if deadline is not None and time.monotonic() > deadline:
                break
            cached[(op, dtype.value)] = probe_pair(name, op, dtype, seeds, options, check)
    finally:  # Ctrl-C or a convsmith bug: keep what was probed
        if cached:
            _write(path, name, versions, options.to_json(), cached.values())
    wanted = [cached[(op, d.value)] for op, d in pairs if (op, d.value) in cached]
    missing = len(pairs) - len(wanted)
    if missing:
        raise ProbeError(f"probe of {name} stopped by its time limit with {missing} pairs left; run it again")
    if not any(e.status in (OK, FAILS) for e in wanted):
        raise ProbeError(f"probe of {name} found no (op, dtype) pair that converts: {_summary(wanted)}")
    return wanted


def _summary(entries: Sequence[ProbeEntry]) -> str:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.status] = counts.get(e.status, 0) + 1
    first = next((e.message for e in entries if e.message), "")
    return f"{counts or 'no pairs'}; first message: {first[:200]}"


def load_probe(cache_dir: str | Path, converters: Sequence[str],
               versions: Mapping[str, Mapping[str, str]] | None = None,
               options: Mapping[str, Any] | None = None) -> ProbeTable | None:
    """The cached table for the current versions, or None when any converter has no cache for them."""
    entries: list[ProbeEntry] = []
    seen: dict[str, Mapping[str, str]] = {}
    for name in converters:
        conv = CONVERTERS[name]
        opts = conv.options((options or {}).get(name))
        vers = (versions or {}).get(name) or conv.versions()
        cached = _read(cache_path(Path(cache_dir), name, vers, opts.to_json()))
        if not cached:
            return None
        entries += cached.values()
        seen[name] = vers
    return ProbeTable(tuple(entries), seen)
