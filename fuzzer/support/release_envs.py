"""One release of a library in a folder of its own (`.convsmith-cache/envs/<dist>-<version>/`), layered over the
working venv: that folder first on PYTHONPATH, the venv's python and everything else the venv has.

A folder holds the release (installed with --no-deps) and whatever of its requirements the venv lacks or has in a
version the release does not take. It is built under a temporary name and renamed into place once its import is
checked, so a killed build never leaves a half folder that a later bisection would reuse."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from fuzzer.support.files import STAGING_PREFIX, atomic_publish_dir, make_shared
from fuzzer.support.lock import installed_version
from fuzzer.support.releases import Run, captured

DEFAULT_ENVS = Path(".convsmith-cache/envs")
MARKER = ".convsmith-env.json"  # written last, inside the folder, before the rename: a folder without it is no env
STALE_S = 3600.0  # a staging folder this old is a killed build's (a build takes a minute), not one in progress
_ROUNDS = 4  # requirements of requirements: a few rounds reach a fixed point for these libraries

VersionOf = Callable[[str], "str | None"]


class EnvError(Exception):
    """A release that would not install or import here (one line: why)."""


@dataclass(frozen=True)
class ReleaseEnv:
    """A built folder: the release it holds and what it added beside it."""

    path: Path
    distribution: str
    version: str
    added: tuple[str, ...] = ()  # requirements installed beside the release ("onnx_ir==0.1.4")

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a process runs this release in: the folder first on PYTHONPATH."""
        env = dict(os.environ if base is None else base)
        rest = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = str(self.path) + (os.pathsep + rest if rest else "")
        return env


def env_path(root: Path, distribution: str, version: str) -> Path:
    """Where one release's folder lives (absolute: repro.py runs from its case folder)."""
    return Path(root).resolve() / f"{canonicalize_name(distribution)}-{version}"


def load_env(path: Path) -> ReleaseEnv | None:
    """The env a finished folder holds; None where there is none (never built, or a build cut short)."""
    try:
        data = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ReleaseEnv(path, str(data["distribution"]), str(data["version"]), tuple(data.get("added", ())))


def folder_versions(folder: Path) -> dict[str, tuple[str, list[str]]]:
    """Every distribution installed in `folder`: canonical name -> (version, its Requires-Dist lines)."""
    found = {}
    for info in folder.glob("*.dist-info"):
        try:
            head = HeaderParser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
        except OSError:
            continue
        found[canonicalize_name(head["Name"])] = (head["Version"], head.get_all("Requires-Dist") or [])
    return found


def unmet(requirements: Iterable[str], have: VersionOf) -> list[str]:
    """The requirements (markers evaluated for this interpreter, no extras) that `have` does not satisfy, as pip
    specs."""
    wanted = []
    for line in requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        version = have(req.name)
        if version is None or not req.specifier.contains(version, prereleases=True):
            wanted.append(f"{req.name}{req.specifier}")
    return sorted(set(wanted))


def _pip_install(folder: Path, specs: Iterable[str], run: Run) -> None:
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--target",
            str(folder), *specs]
    done = run(args)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        raise EnvError(f"pip install {' '.join(specs)} failed: {lines[-1] if lines else done.returncode}")


def _complete(folder: Path, run: Run, have: VersionOf) -> tuple[str, ...]:
    """Install beside the release what it (and what was added) needs that neither the folder nor the venv has."""
    added: list[str] = []
    for _ in range(_ROUNDS):
        present = folder_versions(folder)
        missing = unmet((r for _, reqs in present.values() for r in reqs), _layered(present, have))
        if not missing:
            return tuple(added)
        _pip_install(folder, missing, run)
        added += missing
    return tuple(added)


def _layered(present: Mapping[str, tuple[str, list[str]]], have: VersionOf) -> VersionOf:
    """A version lookup as the layered env sees it: the folder's own distributions first, then the venv's."""
    def version(name: str) -> str | None:
        own = present.get(canonicalize_name(name))
        return own[0] if own else have(name)
    return version


def _check_import(folder: Path, distribution: str, version: str, run: Run) -> None:
    """The release must be what `import` finds with the folder first on PYTHONPATH."""
    module = distribution.replace("-", "_")
    code = (f"import importlib.metadata as m, {module} as x; "
            f"print(m.version({distribution!r})); print(x.__file__)")
    probe = ReleaseEnv(folder, distribution, version)
    done = run([sys.executable, "-c", code], env=probe.environ())
    lines = (done.stdout or "").strip().splitlines()
    if done.returncode != 0 or len(lines) < 2:
        error = (done.stderr or "").strip().splitlines()
        raise EnvError(f"import {module} failed: {error[-1] if error else done.returncode}")
    if lines[0] != version or not Path(lines[1]).resolve().is_relative_to(folder.resolve()):
        raise EnvError(f"import {module} found {lines[0]} at {lines[1]}, not the release in {folder}")


def _remove_stale_builds(final: Path) -> None:
    """Remove the staging folders of this release that a killed build left (never reused: they have no marker)."""
    for staging in final.parent.glob(f"{STAGING_PREFIX}{final.name}-*"):
        try:
            if time.time() - staging.stat().st_mtime > STALE_S:
                shutil.rmtree(staging, ignore_errors=True)
        except OSError:  # another bisection removed it meanwhile
            continue


def ensure_env(root: Path, distribution: str, version: str, run: Run = captured, have: VersionOf = installed_version
               ) -> ReleaseEnv:
    """The folder of one release, built now if no finished one exists (EnvError when it will not install or
    import)."""
    final = env_path(root, distribution, version)
    built = load_env(final)
    if built is not None:
        return built
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(final)
    if final.exists():  # no marker: not a build of ours (ours are renamed in whole), so never to be reused
        shutil.rmtree(final)
    staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{STAGING_PREFIX}{final.name}-"))
    try:
        make_shared(staging)
        _pip_install(staging, [f"{distribution}=={version}"], run)
        added = _complete(staging, run, have)
        _check_import(staging, distribution, version, run)
        marker = {"distribution": distribution, "version": version, "added": list(added)}
        (staging / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        if not atomic_publish_dir(staging, final):  # another bisection built it meanwhile: theirs is as good
            return load_env(final) or ReleaseEnv(final, distribution, version, added)
        return ReleaseEnv(final, distribution, version, added)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


__all__ = ["DEFAULT_ENVS", "EnvError", "ReleaseEnv", "ensure_env", "env_path", "load_env", "unmet"]
