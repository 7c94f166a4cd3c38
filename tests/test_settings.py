"""Converter settings are part of a test: drawn per seed from each converter's real range, pinned ones kept,
recorded with the result and the case, and replayed from the case."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript
from fuzzer.converters.upstream import UpstreamOptions, upstream_opsets
from oracles.verdict import Stage

SEEDS = range(200)
TESTS = Path(__file__).parent
ROOT = TESTS.parent


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
        low, high = upstream_opsets(options.upstream)
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


class CrashesOnEluWithoutFolding(TorchOnnxScript):
    """The TorchScript exporter with a bug planted in one setting: without constant folding, a graph that holds an elu
    crashes at node conversion."""

    name = "planted-folding-crash"

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        if not options.constant_folding and any(node.op == "elu" for node in source.graph.nodes):
            with Steps().at(Stage.NODE_CONVERSION, "convert"):
                raise RuntimeError("planted: elu without constant folding")
        return super().convert_impl(source, options)


PLANTED_REGISTRY = ConverterRegistry([CrashesOnEluWithoutFolding()])


@pytest.mark.slow
def test_a_campaign_records_each_test_settings_and_a_case_replays_them(tmp_path: Path) -> None:
    from fuzzer.cases.folder import read_case
    from fuzzer.cases.replay import REPLAY_CHECK, Outcome, case_expected, replay_outcome
    from fuzzer.check.pipeline import check_prepared

    out, name = tmp_path / "c", CrashesOnEluWithoutFolding.name
    command = [sys.executable, "-m", "fuzzer", "fuzz", "--tests", "12", "--workers", "1", "--registry",
               "test_settings:PLANTED_REGISTRY", "--converters", name, "--ops", "elu,abs", "--dtypes",
               "float32", "--nodes", "2", "--out", str(out), "--no-reduce", "--option",
               f"{name}.constant_folding=false"]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(out / "campaign.db") as db:
        rows = [json.loads(r[0]) for r in db.execute("SELECT options FROM tests")]
    assert len(rows) == 12 and len({r["opset"] for r in rows}) >= 2
    assert {r["constant_folding"] for r in rows} == {False}

    # The case replays its recorded settings: under them the planted bug shows; with folding back on, it does not.
    case = next(c for c in map(read_case, (p for p in out.iterdir() if (p / "case.json").exists()))
                if "planted" in c.verdict.message)
    assert case.converter_options["constant_folding"] is False
    planted = PLANTED_REGISTRY[name]

    def replayed(options: dict) -> Outcome:
        return replay_outcome(case, check_prepared(case_expected(case), planted, options, REPLAY_CHECK).verdict).outcome

    assert replayed(dict(case.converter_options)) is Outcome.REPRODUCES
    assert replayed({**case.converter_options, "constant_folding": True}) is Outcome.FIXED
