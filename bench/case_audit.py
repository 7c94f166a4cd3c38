"""What a maintainer gets from a campaign's cases, checked mechanically: each case folder copied alone into an empty
folder, its report.md's snippet run there, and its repro.py run twice, with the virtual environment's bin/ on PATH
(activated, as a user runs it) and without it (as a campaign's worker runs).

    python bench/case_audit.py CAMPAIGN_DIR [--sample N] [--seed S] [--timeout 180]

A snippet "shows" its bug when it exits non-zero with the library's own error or numpy's assertion; one that exits 0
does not show it; one that fails on its own code (a missing import or file, a syntax or name error) is broken.
repro.py shows its bug when it exits 1. Prints one line per case and the totals.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = VENV_BIN / "python"
SNIPPET = re.compile(r"```python\n(.*?)\n```", re.DOTALL)
# A snippet failing on its own code, not on the converter: it is broken, whatever it meant to show.
BROKEN = re.compile(r"^(ModuleNotFoundError|ImportError|FileNotFoundError|SyntaxError|NameError|IndentationError)\b",
                    re.MULTILINE)


@dataclass(frozen=True)
class Audit:
    """One case folder's outcomes: its snippet's ("shows", "no bug", "broken", "none") and repro.py's exit codes."""

    case: str
    snippet: str
    repro_activated: int
    repro_bare: int


def run_alone(folder: Path, script: str, activated: bool, timeout: float) -> subprocess.CompletedProcess[str]:
    """`script` run with the venv's Python under -I in a copy of `folder`, the venv's bin/ on PATH or not."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p).resolve() != VENV_BIN.resolve()]
    env = {**os.environ, "PATH": os.pathsep.join(([str(VENV_BIN)] if activated else []) + path)}
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "case"
        shutil.copytree(folder, copy)
        try:
            return subprocess.run([str(PYTHON), "-I", script], cwd=copy, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess([script], 124, "", "timed out")


def snippet_outcome(folder: Path, timeout: float) -> str:
    """'shows', 'no bug', 'broken' or 'none' for the folder's report.md snippet, run alone."""
    report = folder / "report.md"
    found = SNIPPET.search(report.read_text()) if report.exists() else None
    if found is None:
        return "none"
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "snippet_audit.py"
        script.write_text(found.group(1))
        shutil.copy(script, folder / "snippet_audit.py")
        try:
            run = run_alone(folder, "snippet_audit.py", True, timeout)
        finally:
            (folder / "snippet_audit.py").unlink(missing_ok=True)
    if run.returncode == 0:
        return "no bug"
    return "broken" if BROKEN.search(run.stderr) else "shows"


def audit(folder: Path, timeout: float) -> Audit:
    return Audit(folder.name, snippet_outcome(folder, timeout),
                 run_alone(folder, "repro.py", True, timeout).returncode,
                 run_alone(folder, "repro.py", False, timeout).returncode)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--sample", type=int, default=0, help="audit this many cases drawn at random (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    folders = sorted(p.parent for p in args.campaign.glob("**/case.json") if (p.parent / "repro.py").exists())
    if not folders:
        print(f"case_audit: no case folder with a repro.py under {args.campaign}", file=sys.stderr)
        return 2
    if args.sample:
        folders = sorted(random.Random(args.seed).sample(folders, min(args.sample, len(folders))))
    audits = []
    for folder in folders:
        result = audit(folder, args.timeout)
        audits.append(result)
        print(f"{result.snippet:8} repro activated {result.repro_activated} bare {result.repro_bare}  {result.case}",
              flush=True)
    both = sum(1 for a in audits if a.repro_activated == 1 and a.repro_bare == 1)
    counts = {k: sum(1 for a in audits if a.snippet == k) for k in ("shows", "no bug", "broken", "none")}
    print(f"{len(audits)} cases: repro.py shows its bug alone both ways in {both}; snippets: "
          + ", ".join(f"{k} {n}" for k, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
