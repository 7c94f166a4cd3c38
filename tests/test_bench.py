"""The benchmarks' own failure paths (their figures are printed by running them, never asserted here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_compare_nnsmith_refuses_a_folder_holding_an_earlier_run(tmp_path: Path) -> None:
    """Each slice resumes the campaign in its folder, so an earlier run left there would be counted with this one."""
    (tmp_path / "convsmith-5").mkdir()
    done = subprocess.run([sys.executable, str(BENCH / "compare_nnsmith.py"), "--skip-nnsmith", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (f"compare_nnsmith.py: error: --out {tmp_path} is not empty: "
                                                   "give a new or empty folder")


def test_compare_nnsmith_refuses_a_file_for_its_folder(tmp_path: Path) -> None:
    (tmp_path / "results.txt").write_text("not a folder")
    done = subprocess.run([sys.executable, str(BENCH / "compare_nnsmith.py"), "--skip-nnsmith", "--out",
                           str(tmp_path / "results.txt")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (f"compare_nnsmith.py: error: --out {tmp_path / 'results.txt'} "
                                                   "is a file: give a new or empty folder")
