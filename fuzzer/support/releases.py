"""Which releases of a library a bisection tries: the package index's final releases with a wheel for this Python and
platform (as the working venv's pip sees them), the installed one back to a floor, and any newer ones."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

from fuzzer.support.errors import CannotRun, UsageError

DEFAULT_SERIES = 8  # minor series (or releases, where a library has few series) back from the installed one
# Distributions whose index builds are multi-GB CUDA downloads: only wheels already on this machine's disk (pip's
# find-links folders) are tried.
DISK_ONLY = frozenset({"torch"})
_AVAILABLE = re.compile(r"^Available versions:\s*(.+)$", re.MULTILINE)
_FIND_LINKS = re.compile(r"find-links\s*=\s*'?([^'\n]+)'?")

class Run(Protocol):
    """How a command is run (a fake in tests): returns its exit status and captured text output."""

    def __call__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        ...


def captured(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a command (pip, python), its output captured as text (the default Run)."""
    return subprocess.run(args, capture_output=True, text=True, timeout=600, check=False,
                          env=None if env is None else dict(env))


@dataclass(frozen=True)
class ReleasePlan:
    """The releases to try, oldest first, and the installed one among them."""

    distribution: str
    releases: tuple[str, ...]
    installed: str

    @property
    def older(self) -> tuple[str, ...]:
        return tuple(v for v in self.releases if Version(v) < Version(self.installed))

    @property
    def newer(self) -> tuple[str, ...]:
        return tuple(v for v in self.releases if Version(v) > Version(self.installed))


def final_versions(versions: Iterable[str]) -> list[Version]:
    """The final releases among `versions` (no pre-, dev- or local builds), newest first, each once."""
    kept: set[Version] = set()
    for text in versions:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if not (version.is_prerelease or version.is_devrelease or version.local):
            kept.add(version)
    return sorted(kept, reverse=True)


def plan_releases(distribution: str, available: Iterable[str], installed: str, series: int = DEFAULT_SERIES
                  ) -> ReleasePlan:
    """The installed release, the newest release of each of the `series` minor series before it (or, where the
    library has fewer series than that, its `series` releases before it), and every newer final release."""
    if series < 1:
        raise UsageError(f"--releases must be at least 1, not {series}")
    base = Version(Version(installed).base_version)
    versions = final_versions(available)
    older = [v for v in versions if v < base]
    latest: dict[tuple[int, int], Version] = {}
    for version in older:
        latest.setdefault((version.major, version.minor), version)
    by_series = [v for v in latest.values() if (v.major, v.minor) != (base.major, base.minor)]
    floor = by_series[:series] if len(by_series) >= series else older[:series]
    newer = [v for v in versions if v > base]
    chosen = sorted({*floor, *newer, base})
    return ReleasePlan(distribution, tuple(str(v) for v in chosen), str(base))


def index_versions(distribution: str, run: Run = captured) -> tuple[str, ...]:
    """Every version the working venv's pip can install for this Python and platform (`pip index versions`)."""
    done = run([sys.executable, "-m", "pip", "index", "versions", distribution])
    found = _AVAILABLE.search(done.stdout or "")
    if done.returncode != 0 or not found:
        why = (done.stderr or done.stdout or "").strip().splitlines()
        last = why[-1] if why else f"pip exited {done.returncode}"
        raise CannotRun(f"cannot list the releases of {distribution} (no network, or no such package): {last}")
    return tuple(v.strip() for v in found.group(1).split(",") if v.strip())


def disk_versions(distribution: str, folders: Iterable[Path]) -> tuple[str, ...]:
    """The versions of `distribution` whose wheels lie in `folders` (pip's find-links)."""
    found = []
    for folder in folders:
        for wheel in sorted(Path(folder).glob("*.whl")) if Path(folder).is_dir() else ():
            name, version, _, _ = parse_wheel_filename(wheel.name)
            if name == distribution:
                found.append(str(version))
    return tuple(found)


def find_links(run: Run = captured) -> tuple[Path, ...]:
    """The folders of wheels pip's configuration names (find-links)."""
    done = run([sys.executable, "-m", "pip", "config", "list"])
    folders = [p for m in _FIND_LINKS.finditer(done.stdout or "") for p in m.group(1).split()]
    return tuple(dict.fromkeys(Path(p.removeprefix("file://")) for p in folders))


def available_versions(distribution: str, run: Run = captured) -> tuple[str, ...]:
    """The releases a bisection may install here: the index's, or for DISK_ONLY libraries the wheels on disk."""
    if distribution in DISK_ONLY:
        return disk_versions(distribution, find_links(run))
    return index_versions(distribution, run)


def releases_to_try(distribution: str, installed: str, series: int = DEFAULT_SERIES, run: Run = captured
                    ) -> ReleasePlan:
    """The plan for `distribution`; CannotRun when fewer than two releases can be tried here (why, in one line)."""
    plan = plan_releases(distribution, available_versions(distribution, run), installed, series)
    if len(plan.releases) < 2:
        why = (f"{distribution} is not bisected here: its index builds are multi-GB CUDA downloads and only "
               f"{', '.join(plan.releases) or 'no release'} lies on this machine's disk" if distribution in DISK_ONLY
               else f"{distribution} has no other final release for this Python and platform")
        raise CannotRun(why)
    return plan


__all__ = ["DEFAULT_SERIES", "ReleasePlan", "available_versions", "final_versions", "plan_releases",
           "releases_to_try"]
