"""Two versions of the `generators` package in one process, for measurements paired seed by seed.

A machine whose load moves by more than a change's effect can only compare two versions run side by side: the
other version's package is exported from git (`git archive`, no worktree left behind) and imported beside this one.
Both are named `generators`, so each call first puts its own modules back into `sys.modules` (a function's deferred
`from generators.x import y` must find its own tree).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

PACKAGE = "generators"


def export_package(root: Path, rev: str, dest: Path) -> Path:
    """`generators/` as it is at `rev` of the repository at `root`, written under `dest`; returns `dest`."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, PACKAGE], cwd=root, capture_output=True,
                             check=True).stdout
    with tempfile.TemporaryFile() as tar_file:
        tar_file.write(archive)
        tar_file.seek(0)
        with tarfile.open(fileobj=tar_file) as tar:
            tar.extractall(dest, filter="data")
    return dest


def _own_modules() -> dict[str, ModuleType]:
    return {name: module for name, module in sys.modules.items()
            if name == PACKAGE or name.startswith(PACKAGE + ".")}


class PackageTree:
    """One tree's `generators` modules, imported from `root` and swapped into `sys.modules` while in use."""

    def __init__(self, root: Path, modules: tuple[str, ...]) -> None:
        for name in _own_modules():
            del sys.modules[name]
        sys.path.insert(0, str(root))
        try:
            self.imported = [importlib.import_module(name) for name in modules]
        finally:
            sys.path.remove(str(root))
        self.root = root
        self._modules = _own_modules()

    @contextmanager
    def active(self) -> Iterator[None]:
        """This tree's modules in `sys.modules` for the duration (the other tree's are put back after)."""
        saved = _own_modules()
        for name in saved:
            del sys.modules[name]
        sys.modules.update(self._modules)
        try:
            yield
        finally:
            for name in self._modules:
                sys.modules.pop(name, None)
            sys.modules.update(saved)
