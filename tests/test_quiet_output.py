"""Without -v, a campaign and `ops --coverage` print only convsmith's own lines: TensorFlow's absl and CUDA notices
and torch's registration warnings go to the campaign's logs (the fork server's) or are dropped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.supervisor import FORK_SERVER_LOG

ROOT = Path(__file__).parent.parent
# Lines the libraries print that reviewers found on the terminal.
LIBRARY_NOISE = ("absl::InitializeLog", "cudart_stub", "Could not find cuda drivers", "cpu_feature_guard",
                 "oneDNN", "torchvision is not installed", "_registration.py", "resource_tracker")


def _convsmith(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "GRPC_VERBOSITY",
                                                             "GLOG_minloglevel")}
    return subprocess.run([sys.executable, "-m", "fuzzer", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def _noise(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(mark in line for mark in LIBRARY_NOISE)]


@pytest.mark.slow
def test_campaign_and_coverage_print_no_library_notices(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    out = tmp_path / "camp"
    fuzz = _convsmith("fuzz", "--tests", "1", "--workers", "1", "--converters", "tf2onnx", "--nodes", "2",
                      "--no-reduce", "--no-prepare-ahead", "--seed", "3", "--out", str(out))
    assert fuzz.returncode == 0, fuzz.stdout + fuzz.stderr
    assert fuzz.stderr == "" and _noise(fuzz.stdout) == [], fuzz.stdout + fuzz.stderr
    assert "own errors (convsmith bugs): 0" in fuzz.stdout, fuzz.stdout
    # The notices are kept, in the log of the fork server that imported TensorFlow.
    assert _noise((out / LOG_DIR / FORK_SERVER_LOG).read_text()) != []
    coverage = _convsmith("ops", "--coverage", str(out))
    assert coverage.returncode == 0, coverage.stderr
    assert coverage.stderr == "" and _noise(coverage.stdout) == [], coverage.stdout + coverage.stderr
