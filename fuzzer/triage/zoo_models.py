"""The zoo's converted ONNX models, made once and kept: each architecture at its small size (seed 0) through each
exporter of its framework (the two torch exporters, or tf2onnx), as the converters of a campaign receive them.

They are written under `.convsmith-cache/zoo-models/<key>/`, the key a hash of the exporters' and the zoo's library
versions and of the zoo's own source, so a new release or a changed entry makes them again. An export that fails is
remembered too (`<entry>--<exporter>.failed`, its reason), so it is not tried on every report.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import generators.zoo
from fuzzer.check.zoo import EXPORTERS, convert, prepare_zoo
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.conversion import StageError, UpstreamError
from fuzzer.support.files import atomic_write_bytes, atomic_write_text
from generators.zoo import ZooEntry

DEFAULT_CACHE = Path(".convsmith-cache/zoo-models")
ZOO_SEED = 0
LIBRARIES = ("transformers", "tf-keras", "tensorflow")  # beside the exporters': what the zoo's models are built with


@dataclass(frozen=True)
class ZooExport:
    """One zoo architecture's model as one exporter wrote it (path None: the export failed, `reason` says how)."""

    entry: str
    exporter: str
    path: Path | None
    reason: str = ""


def cache_key(registry: ConverterRegistry) -> str:
    """The hash of the libraries the exports depend on and of the zoo's source files."""
    dists = sorted({d for names in EXPORTERS.values() for name in names if name in registry
                    for d in registry[name].distributions} | set(LIBRARIES))
    versions = {d: _version(d) for d in dists}
    zoo_dir = Path(generators.zoo.__file__).parent
    sources = {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(zoo_dir.glob("*.py"))}
    text = json.dumps({"versions": versions, "zoo": sources, "seed": ZOO_SEED}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def zoo_exports(cache_dir: Path, entries: Sequence[ZooEntry], registry: ConverterRegistry,
                progress: Callable[[str], None] | None = None) -> list[ZooExport]:
    """Every (entry, exporter) model of `entries`, from the cache where it is there, else made now and cached."""
    folder = Path(cache_dir) / cache_key(registry)
    found = []
    for entry in entries:
        exporters = [name for name in EXPORTERS[entry.framework] if name in registry]
        cached = [_cached(folder, entry.name, name) for name in exporters]
        if any(c is None for c in cached):
            if progress is not None:
                progress(entry.name)
            cached = list(_export(folder, entry, exporters, registry))
        found += [c for c in cached if c is not None]
    return found


def _cached(folder: Path, entry: str, exporter: str) -> ZooExport | None:
    model, failed = folder / f"{entry}--{exporter}.onnx", folder / f"{entry}--{exporter}.failed"
    if model.is_file():
        return ZooExport(entry, exporter, model)
    if failed.is_file():
        return ZooExport(entry, exporter, None, failed.read_text(encoding="utf-8"))
    return None


def _export(folder: Path, entry: ZooEntry, exporters: Sequence[str], registry: ConverterRegistry
            ) -> list[ZooExport]:
    """Build the entry once and write each exporter's model of it (or why there is none) into the cache."""
    folder.mkdir(parents=True, exist_ok=True)
    prepared = prepare_zoo(entry.build(ZOO_SEED))
    done = []
    for name in exporters:
        converter = registry[name]
        model, reason = None, ""
        try:
            model = convert(prepared, converter, converter.options({})).model
        except StageError as exc:  # an export the runtime or checker refused still shows what it emits
            model, reason = exc.model, str(exc)[:300]
        except UpstreamError as exc:
            reason = str(exc)[:300]
        stem = folder / f"{entry.name}--{name}"
        if model is not None:
            atomic_write_bytes(stem.with_suffix(".onnx"), model)
            done.append(ZooExport(entry.name, name, stem.with_suffix(".onnx")))
        else:
            atomic_write_text(stem.with_suffix(".failed"), reason or "no model")
            done.append(ZooExport(entry.name, name, None, reason or "no model"))
    return done
