"""Zoo architectures in the campaign (`convsmith fuzz --source zoo`): the seed picks the architecture, each
converter that can take it tests it, another is skipped as inexpressible, and a planted converter bug is recorded
with its evidence folder."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from fuzzer.campaign.db import DB_NAME
from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.messages import UnitGraph, UnitPrepared
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.spec import LOG_DIR, case_folders
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.campaign.zoo_unit import (
    EVIDENCE_DIR,
    ZOO_MEMORY_MB,
    ZOO_SOURCE,
    ZOO_TIMEOUT_S,
    drawn_options,
    zoo_entries,
    zoo_entry_for,
    zoo_options,
)
from fuzzer.cases.case import case_id
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.support.tensors import to_oracle_array
from generators.zoo.registry import ZOO


class ZooOffByOne(Converter):
    """A planted exporter bug: the source's own outputs, each one too large."""

    name = "zoo-off-by-one"
    libraries = ()
    distributions = ()
    options_type = ConverterOptions

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        outputs, dtypes = zip(*(to_oracle_array(o) for o in source.module(*source.inputs)))
        return TargetRun(tuple(o + np.float32(1.0) for o in outputs), tuple(dtypes), {})


REGISTRY = {**CONVERTERS, ZooOffByOne.name: ZooOffByOne()}
ROOT = Path(__file__).resolve().parents[1]


def seed_of(name: str) -> int:
    """The first seed whose unit tests the zoo entry `name`."""
    entries = zoo_entries()
    return next(seed for seed in range(1000) if zoo_entry_for(seed, entries).name == name)


def test_the_seed_alone_picks_the_architecture_and_every_one_is_drawn() -> None:
    entries = zoo_entries()
    assert [zoo_entry_for(s, entries).name for s in range(8)] == [zoo_entry_for(s, entries).name for s in range(8)]
    assert {zoo_entry_for(s, entries).name for s in range(600)} == {e.name for e in entries}


def test_each_converter_takes_the_zoo_models_of_its_framework() -> None:
    gru, keras = ZOO["gru"], ZOO["keras-lstm"]
    assert zoo_options(CONVERTERS["torch-onnx-dynamo"], gru, 3) == {}
    assert zoo_options(CONVERTERS["tf2onnx"], gru, 3) is None
    tool = zoo_options(CONVERTERS["ort-transformers"], gru, 3)
    assert tool is not None and tool["upstream"] in ("torch-onnx-dynamo", "torch-onnx-script")
    assert zoo_options(CONVERTERS["ort-transformers"], gru, 3) == tool  # drawn by the seed
    assert zoo_options(CONVERTERS["tf2onnx"], keras, 3) == {}
    assert zoo_options(CONVERTERS["torch-onnx-dynamo"], keras, 3) is None
    assert zoo_options(CONVERTERS["ort-transformers"], keras, 3) is None


def test_a_campaign_that_varies_settings_draws_them_around_the_zoos_upstream() -> None:
    tool = CONVERTERS["ort-transformers"]
    drawn = [drawn_options(tool, seed, {"upstream": "torch-onnx-script", "opset": 17}, {}) for seed in range(40)]
    assert {d["upstream"] for d in drawn} == {"torch-onnx-script"}
    assert len({d["opset"] for d in drawn}) > 1 and len({d["model_type"] for d in drawn}) > 1
    assert drawn_options(tool, 7, {"upstream": "torch-onnx-script"}, {}) == drawn[7]  # drawn by the seed alone
    pinned = drawn_options(CONVERTERS["torch-onnx-dynamo"], 3, {}, {"optimize": False})
    assert pinned["optimize"] is False


def test_a_zoo_unit_records_its_tests_and_the_evidence_of_a_planted_bug(tmp_path: Path) -> None:
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), source=ZOO_SOURCE)
    sent = Collected()
    seed = seed_of("gru")
    UnitRunner(config, REGISTRY, sent).run_unit(4, seed, ("torch-onnx-script", "zoo-off-by-one", "tf2onnx"))
    assert not any(isinstance(m, UnitGraph) for m in sent.messages)  # a zoo unit has no graph
    prepared = next(m for m in sent.messages if isinstance(m, UnitPrepared))
    assert (prepared.idx, prepared.values) == (4, "zoo")
    results = {m.converter: m for m in sent.messages if isinstance(m, TestResult)}
    assert [(c, r.symptom, r.labels) for c, r in results.items()] == [
        ("torch-onnx-script", "pass", ("zoo:gru",)),
        ("zoo-off-by-one", "wrong_values", ("zoo", "zoo:gru")),
        ("tf2onnx", "unsupported", ("skipped-inexpressible",))]
    bug = results["zoo-off-by-one"]
    assert bug.is_bug and bug.message == "output steps of zoo model gru: values, max_abs=1"
    folder = tmp_path / EVIDENCE_DIR / case_id(bug.signature)
    record = json.loads((folder / "zoo.json").read_text())
    assert (record["entry"], record["seed"], record["converter"]) == ("gru", seed, "zoo-off-by-one")
    assert record["check"] == f"convsmith check --zoo gru --seed {seed} --converters zoo-off-by-one"
    # The planted exporter keeps no ONNX model: its blame is its own, and says what was not examined.
    assert (record["blame"]["component"]["key"], record["blame"]["settled"]) == ("zoo-off-by-one", False)
    report = (folder / "report.md").read_text().splitlines()
    assert report[0] == "# zoo-off-by-one: wrong values at node conversion on zoo model `gru`"
    assert "## Whose bug" in report and record["check"] in report
    data = onnx.TensorProto.FromString((folder / "test_data_set_0" / "input_0.pb").read_bytes())
    assert (data.name, list(data.dims)) == ("x", [2, 6, 8])
    assert sorted(p.name for p in (folder / "test_data_set_0").iterdir()) == ["input_0.pb", "output_0.pb",
                                                                              "output_1.pb"]


def fuzz_zoo(out: Path, seed: int, *extra: str) -> None:
    """`convsmith fuzz --source zoo` of one unit at `seed`, the tests folder importable (its planted registries)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(ROOT), str(ROOT / "tests"))))
    done = subprocess.run([sys.executable, "-m", "fuzzer", "fuzz", "--source", "zoo", "--tests", "1", "--workers",
                           "1", "--seed", str(seed), "--no-reduce", "--out", str(out), *extra], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_fuzz_source_zoo_runs_a_campaign_of_zoo_units(tmp_path: Path) -> None:
    out, seed = tmp_path / "zoo", seed_of("gru")
    fuzz_zoo(out, seed, "--converters", "torch-onnx-script,ort-optimizer,tf2onnx")
    conn = sqlite3.connect(out / DB_NAME)
    rows = conn.execute("SELECT seed, converter, symptom, labels FROM tests ORDER BY converter").fetchall()
    assert [(s, c, sym) for s, c, sym, _ in rows] == [(seed, "ort-optimizer", "pass"), (seed, "tf2onnx", "unsupported"),
                                                      (seed, "torch-onnx-script", "pass")]
    assert [json.loads(labels) for *_, labels in rows] == [["zoo:gru"], ["skipped-inexpressible"], ["zoo:gru"]]
    assert conn.execute("SELECT nodes, value_strategy FROM units").fetchall() == [(None, "zoo")]
    worker = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()[0])["worker"]
    assert (worker["timeout_s"], worker["memory_mb"], worker["prepare_ahead"]) == (ZOO_TIMEOUT_S, ZOO_MEMORY_MB, False)


@pytest.mark.slow
def test_a_zoo_test_lost_to_a_dead_worker_is_recorded_without_a_graph_case(tmp_path: Path) -> None:
    out, seed = tmp_path / "zoo", seed_of("gru")
    fuzz_zoo(out, seed, "--registry", "test_isolation:FAULTY_REGISTRY", "--converters",
             "faulty-segfault,torch-onnx-script")
    conn = sqlite3.connect(out / DB_NAME)
    rows = conn.execute("SELECT converter, symptom FROM tests ORDER BY converter").fetchall()
    assert rows == [("faulty-segfault", "process_death"), ("torch-onnx-script", "pass")]
    assert conn.execute("SELECT COUNT(*) FROM errors").fetchone() == (0,)
    assert case_folders(out) == []
