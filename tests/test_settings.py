"""Converter settings are part of a test: drawn per seed from each converter's real range, pinned ones kept,
recorded with the result and the case, and replayed from the case."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import CONVERTERS
from fuzzer.converters.upstream import UPSTREAM_OPSETS, UpstreamOptions

SEEDS = range(200)


def _key(options: dict) -> str:
    return json.dumps(options, sort_keys=True)


@pytest.mark.parametrize("name", list(CONVERTERS))
def test_every_converter_draws_valid_settings_from_its_range(name: str) -> None:
    options_type = CONVERTERS[name].options_type
    drawn = [options_type.draw(seed) for seed in SEEDS]
    assert [o.to_json() for o in drawn] == [options_type.draw(seed).to_json() for seed in SEEDS]  # by seed only
    distinct = {_key(o.to_json()) for o in drawn}
    assert len(distinct) >= 5
    usual = options_type() if not issubclass(options_type, UpstreamOptions) else \
        options_type(upstream="torch-onnx-dynamo", opset=18)  # the ONNX tools usually start from dynamo
    assert max(distinct, key=lambda k: sum(_key(o.to_json()) == k for o in drawn)) == _key(usual.to_json())


def test_the_drawn_values_cover_each_option_range() -> None:
    script = {o.opset for o in (CONVERTERS["torch-onnx-script"].options_type.draw(s) for s in range(600))}
    assert script == set(range(7, 21))
    levels = {o.level for o in (CONVERTERS["ort-optimizer"].options_type.draw(s) for s in SEEDS)}
    assert levels == {"basic", "extended", "all"}  # disabled is the reference, never the test
    targets = {o.target_opset for o in (CONVERTERS["onnx-version-converter"].options_type.draw(s) for s in SEEDS)}
    assert min(targets) == 7 and max(targets) == 23  # down-conversion too
    for seed in SEEDS:
        options = CONVERTERS["onnxsim"].options_type.draw(seed)
        low, high = UPSTREAM_OPSETS[options.upstream]
        assert low <= options.opset <= high


def test_the_onnx_tools_of_one_graph_share_one_upstream_export() -> None:
    tools = [c for c in CONVERTERS.values() if issubclass(c.options_type, UpstreamOptions)]
    for seed in SEEDS:
        pairs = {(o.upstream, o.opset) for o in (c.options_type.draw(seed) for c in tools)}
        assert len(pairs) == 1
    upstreams = [CONVERTERS["onnxslim"].options_type.draw(seed).upstream for seed in SEEDS]
    assert 0.55 < upstreams.count("torch-onnx-dynamo") / len(upstreams) < 0.8


def test_pinned_options_are_kept_and_defaults_used_when_settings_do_not_vary() -> None:
    converter = CONVERTERS["ort-optimizer"]
    config = WorkerConfig(out_dir="o", log_dir="l", converter_options={"ort-optimizer": {"level": "basic"}},
                          vary_settings=True)
    assert {config.options_for(converter, seed)["level"] for seed in SEEDS} == {"basic"}
    fixed = WorkerConfig(out_dir="o", log_dir="l")
    assert {_key(fixed.options_for(converter, seed)) for seed in SEEDS} == {_key(converter.options(None).to_json())}


def test_a_campaign_records_each_test_settings_and_a_case_replays_them(tmp_path: Path) -> None:
    out = tmp_path / "c"
    command = [sys.executable, "-m", "fuzzer", "fuzz", "--tests", "12", "--workers", "1", "--converters",
               "torch-onnx-script", "--ops", "elu,abs", "--dtypes", "bfloat16,float32", "--nodes", "2",
               "--out", str(out), "--no-reduce", "--option", "torch-onnx-script.constant_folding=false"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(out / "campaign.db") as db:
        rows = [json.loads(r[0]) for r in db.execute("SELECT options FROM tests")]
    assert len(rows) == 12 and len({r["opset"] for r in rows}) >= 2
    assert {r["constant_folding"] for r in rows} == {False}
    from fuzzer.cases.folder import read_case
    from fuzzer.cases.replay import Outcome, replay

    case = read_case(next(p for p in out.iterdir() if (p / "case.json").exists()))
    assert case.converter_options["constant_folding"] is False
    assert replay(case).outcome is Outcome.REPRODUCES
