"""The benchmarks' own failure paths and the layout of the comparison table (their figures are printed by running
them, never asserted here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.slow
def test_compare_nnsmith_refuses_a_folder_holding_an_earlier_run(tmp_path: Path) -> None:
    """Each slice resumes the campaign in its folder, so an earlier run left there would be counted with this one."""
    (tmp_path / "convsmith-5").mkdir()
    done = subprocess.run([sys.executable, str(BENCH / "compare_nnsmith.py"), "--skip-nnsmith", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (f"compare_nnsmith.py: error: --out {tmp_path} is not empty: "
                                                   "give a new or empty folder")


@pytest.mark.slow
def test_compare_nnsmith_refuses_a_file_for_its_folder(tmp_path: Path) -> None:
    (tmp_path / "results.txt").write_text("not a folder")
    done = subprocess.run([sys.executable, str(BENCH / "compare_nnsmith.py"), "--skip-nnsmith", "--out",
                           str(tmp_path / "results.txt")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (f"compare_nnsmith.py: error: --out {tmp_path / 'results.txt'} "
                                                   "is a file: give a new or empty folder")


def test_the_comparison_table_shows_each_slices_rate_and_both_pairings_ratios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import compare_nnsmith

    ours = {"loop_per_min": 1019.8, "tests": 2079, "reports": 194, "failing_tests": 1389, "prepare_ahead": False,
            "workers": 1, "loop_s": 122.0, "tests_per_min": 1010.6, "wall_s": 123.0, "unsupported": 227,
            "outside": 0.11, "slice_rates": [950.4, 1019.7, 1090.3]}
    one = {"models_per_min": 559.1, "loop_s": 147.0}
    theirs = {"models_per_min": 559.1, "models": 1371, "reports": 113, "reports_by_kind": {"crash": 113},
              "loop_s": 147.0, "startup_s": 12.0, "distinct_exceptions": 1, "failed_make": 1, "returncode": 0,
              "stalls": 0, "slice_rates": [708.0, 530.9, 545.0], "processes": [one]}
    two = {**theirs, "models_per_min": 1000.0, "processes": [one, {"models_per_min": 440.9, "loop_s": 146.0}],
           "slice_rates": [1000.0], "loop_s": 145.0}
    per_core = compare_nnsmith.Pairing("per-core", 1, False, 1)
    both = compare_nnsmith.Pairing("both-cores", 2, None, 2)
    wide = {**ours, "workers": 2, "loop_per_min": 1500.0, "slice_rates": [1500.0]}
    lines = compare_nnsmith.table([(10, per_core, ours, theirs), (10, both, wide, two)], 2).splitlines()
    assert lines[2].endswith("11% of loop time outside converter/runtime; per slice 950/1020/1090/min")
    assert lines[3].endswith("1 failed to make; per slice 708/531/545/min")
    assert lines[4].split() == ["10", "convsmith", "/", "nnsmith", "1.82x", "per", "core", "(1", "worker,", "no",
                                "feeder", ":", "1", "process)"]
    assert "2 processes at once, rates added (559 + 441/min), loops of 147/146 s overlapping 145 s" in lines[6]
    assert lines[7].split()[4:7] == ["1.50x", "both", "cores"]
    assert lines[9] == ("convsmith / nnsmith, per core, the ratio to quote (1 worker, no feeder : 1 process): "
                        "1.82x at 10 nodes")
    one_slice = compare_nnsmith.table([(10, per_core, {**ours, "slice_rates": [1019.8]}, None)], 2).splitlines()
    assert one_slice[2].endswith("outside converter/runtime")
