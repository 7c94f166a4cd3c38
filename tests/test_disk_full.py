"""A full device under a running campaign: one clear line and exit 3, the database consistent, nothing recorded
lost, and the campaign resumable once there is space again.

The device is a small tmpfs mounted for the test (root only; skipped elsewhere). The disk is filled through the
registry: a planted ONNX tool (`test_disk_full:FILLING_REGISTRY`) that, the first time it runs, fills the device
under the campaign folder and then crashes on every model, so the campaign must write a case folder at once.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest

from fuzzer.converters import ConverterRegistry
from fuzzer.converters.describe import Snippet
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions

FILL_ENV = "CONVSMITH_TEST_FILL"  # the folder on the small device to fill; its sibling marker says it was done
CHUNK = 1 << 16


class PlantedFillingCrash(OnnxPassConverter):
    """An ONNX tool that fills the campaign's device once (where FILL_ENV says), then crashes on every model."""

    name = "planted-filling-crash"
    libraries = ("onnxruntime",)
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        target = os.environ.get(FILL_ENV)
        if target and not Path(target + ".filled").exists():
            Path(target + ".filled").touch()
            fill(Path(target) / "filler")
        raise RuntimeError("planted crash on every model")

    def snippet(self, options: ConverterOptions) -> Snippet:
        return Snippet((), ("raise RuntimeError('planted crash on every model')",))


FILLING_REGISTRY = ConverterRegistry([PlantedFillingCrash()])


def fill(path: Path) -> None:
    """Write to `path` until the device has no space left."""
    with open(path, "wb") as out:
        try:
            while True:
                out.write(b"\0" * CHUNK)
                out.flush()
        except OSError:
            pass


@pytest.fixture
def small_device(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "device"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fuzz(*args: str, fill_at: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    if fill_at is not None:
        env[FILL_ENV] = str(fill_at)
    return subprocess.run([sys.executable, "-m", "fuzzer", "fuzz", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=Path(__file__).resolve().parents[1])


@pytest.mark.slow
def test_a_full_disk_stops_the_campaign_in_one_line_and_it_resumes(small_device: Path, tmp_path: Path) -> None:
    out = small_device / "campaign"
    campaign = ("--registry", "test_disk_full:FILLING_REGISTRY", "--converters", PlantedFillingCrash.name,
                "--tests", "3", "--workers", "1", "--no-reduce", "--no-prepare-ahead", "--nodes", "3")
    first = fuzz(*campaign, "--out", str(out), fill_at=small_device)
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    lines = [line for line in first.stderr.splitlines() if line.startswith("convsmith fuzz: no space left")]
    assert len(lines) == 1 and lines[0].endswith(f"then continue it with --resume {out}"), first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    with sqlite3.connect(out / "campaign.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        committed = conn.execute("SELECT idx, case_dir FROM tests t JOIN bugs b USING (signature)").fetchall()
    assert all(case_dir is None or (out / case_dir).is_dir() for _, case_dir in committed)

    (small_device / "filler").unlink()
    again = fuzz("--resume", str(out))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    with sqlite3.connect(out / "campaign.db") as conn:
        tests = conn.execute("SELECT idx, stage, symptom FROM tests ORDER BY idx").fetchall()
        cases = [d for (d,) in conn.execute("SELECT case_dir FROM bugs")]
    assert [idx for idx, _, _ in tests] == [0, 1, 2]  # each unit once, none lost
    # The interrupted and resumed campaign records what the same campaign records on a roomy disk.
    whole = fuzz(*campaign, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    with sqlite3.connect(tmp_path / "whole" / "campaign.db") as conn:
        assert tests == conn.execute("SELECT idx, stage, symptom FROM tests ORDER BY idx").fetchall()
    assert ("graph_optimization", "crash") in [(stage, symptom) for _, stage, symptom in tests]
    assert cases and all(d and (out / d / "case.json").is_file() for d in cases)
