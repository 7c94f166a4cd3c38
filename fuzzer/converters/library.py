"""What a converter needs installed to run here, and the versions that key its bug cases and probe caches."""

from __future__ import annotations

import importlib

from fuzzer.support.lock import installed_version


class Library:
    """A converter's libraries: those that must import (`libraries`), the distributions whose versions it reports
    (`distributions`), and its library's documented "not implemented" messages (regular expressions, beside those
    oracles/taxonomy.py knows for every library: a failure with one is unsupported, counted and never filed)."""

    libraries: tuple[str, ...]
    distributions: tuple[str, ...]
    unsupported_messages: tuple[str, ...] = ()

    def availability(self) -> tuple[bool, str]:
        """(True, "") when every library imports; else (False, the import error)."""
        for lib in self.libraries:
            try:
                importlib.import_module(lib)
            except Exception as exc:  # a broken install may raise anything at import time
                return False, f"import {lib} failed: {type(exc).__name__}: {exc}"
        return True, ""

    def versions(self) -> dict[str, str]:
        return {d: distribution_version(d) for d in self.distributions}


def distribution_version(name: str) -> str:
    return installed_version(name) or "not installed"
