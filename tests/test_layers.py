"""The architecture contract of pyproject.toml holds: import-linter finds no import against the layers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "lint-imports is missing: install the dev extra (make install)"
    done = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "6 kept, 0 broken" in done.stdout


def test_no_import_cycles() -> None:
    """No module reaches itself through its imports (the layers contract cannot see cycles inside a layer)."""
    import grimp

    graph = grimp.build_graph("fuzzer", "oracles", "generators")
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.append(" -> ".join((module, *chain)))
    assert cycles == []
