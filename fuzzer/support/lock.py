"""The lock file: the stack `make install` installs, a pip constraints file of `name==version` pins.

It ships inside this package (`fuzzer/support/stack.lock`): the Makefile reads it by path and the installed package
finds it beside this module, editable or not. `make install` copies the lock it installed from into the environment
(`RECORD_NAME` under `sys.prefix`), which is then the lock that environment is checked against. `make lock` writes a
new one with `python -m fuzzer.support.lock PATH` run inside a throwaway environment of the newest releases.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import canonicalize_name

from fuzzer.support.errors import UsageError
from fuzzer.support.files import atomic_write_text

PACKAGE_LOCK = Path(__file__).with_name("stack.lock")
RECORD_NAME = "convsmith-stack.lock"
# What `pip freeze` leaves out, and the project itself: none of them is part of the stack under test.
UNLOCKED = frozenset({"pip", "setuptools", "wheel", "distribute", "convsmith"})

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.!+_-]*)$")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them: `ml_dtypes`, `ML-Dtypes` and `ml-dtypes` are one."""
    return canonicalize_name(name)


def release(version: str) -> str:
    """A version without its local label (`2.13.0+cpu` -> `2.13.0`): the lock pins releases, so that pip may take
    the CPU build here and the CUDA build of the same release on a GPU box."""
    return version.split("+", 1)[0]


def agrees(locked: str, installed: str | None) -> bool:
    """Whether an installed version satisfies a pin `==locked` (PEP 440: a local label is ignored)."""
    return installed is not None and release(installed) == release(locked)


def parse_lock(text: str, origin: str = "lock") -> dict[str, str]:
    """Canonical name -> version of each pin; comments and blank lines skipped; a bad line is a UsageError."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if not match:
            raise UsageError(f"{origin}:{number}: expected a pin 'name==version', got {line!r}")
        name = canonical(match.group(1))
        if name in pins:
            raise UsageError(f"{origin}:{number}: {name} is pinned twice")
        pins[name] = match.group(2)
    return pins


def read_lock(path: Path) -> dict[str, str]:
    """The pins of the lock file at `path`; a missing or unreadable file is a UsageError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the lock {path}: {exc.strerror or exc}") from None
    return parse_lock(text, str(path))


def active_lock() -> Path:
    """The lock this environment was installed from (`make install` records it), else the one the package ships."""
    record = Path(sys.prefix) / RECORD_NAME
    return record if record.is_file() else PACKAGE_LOCK


def locked_versions(path: Path | None = None) -> dict[str, str]:
    """Canonical name -> locked version, from `path` or else the active lock (for `convsmith converters`, bisect)."""
    return read_lock(path if path is not None else active_lock())


def installed_version(name: str) -> str | None:
    """The version of an installed distribution, None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_versions() -> dict[str, str]:
    """Canonical name -> release of every distribution this interpreter sees, but those in UNLOCKED."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if name and name not in UNLOCKED:
            found.setdefault(name, release(dist.version))  # the first on sys.path is the one imported
    return dict(sorted(found.items()))


def render_lock(pins: Mapping[str, str]) -> str:
    """The lock file's text: a header saying where it was made, then one pin a line, sorted."""
    head = (f"# convsmith's stack, written by `make lock` (python {platform.python_version()}, "
            f"{platform.system().lower()} {platform.machine()}). `make install` installs it with `pip -c`.\n")
    return head + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def write_lock(path: Path, pins: Mapping[str, str]) -> None:
    """Write the lock atomically: a reader sees the old stack or the new one, never half of one."""
    atomic_write_text(Path(path), render_lock(pins))


def main(argv: list[str]) -> int:
    """`python -m fuzzer.support.lock PATH`: write this environment's distributions as the lock at PATH."""
    if len(argv) != 1:
        print("usage: python -m fuzzer.support.lock PATH", file=sys.stderr)
        return 2
    pins = installed_versions()
    write_lock(Path(argv[0]), pins)
    print(f"{argv[0]}: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
