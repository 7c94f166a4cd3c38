"""Zoo architectures in the default campaign mix: the seed alone draws a unit's source, a zoo unit gets the zoo's
timeout, the share is none where the zoo cannot run, and `status` splits the budget between the sources."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fuzzer.campaign import tallies
from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.messages import UnitGraph, UnitPrepared
from fuzzer.campaign.progress import format_summary, summarize
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.sources import MIX, ZOO_SHARE, SourceKind, unit_source
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.campaign.zoo_unit import zoo_entries, zoo_entry_for
from fuzzer.commands import fuzz
from fuzzer.commands.fuzz import mix_zoo_share
from fuzzer.converters import CONVERTERS, DEFAULT_REGISTRY
from generators.zoo import Framework

SEEDS = range(3000)


def test_a_mix_draws_the_zoo_on_its_share_of_seeds_by_the_seed_alone() -> None:
    drawn = [unit_source(MIX, ZOO_SHARE, s) for s in SEEDS]
    assert drawn == [unit_source(MIX, ZOO_SHARE, s) for s in SEEDS]
    assert abs(drawn.count(SourceKind.ZOO) / len(drawn) - ZOO_SHARE) < 0.01
    assert {unit_source(MIX, 0.0, s) for s in SEEDS} == {SourceKind.GRAPHS}
    assert {unit_source("graphs", 0.5, s) for s in SEEDS} == {SourceKind.GRAPHS}
    assert {unit_source("zoo", 0.0, s) for s in SEEDS} == {SourceKind.ZOO}


def test_a_zoo_unit_of_a_mix_gets_the_zoos_timeout_and_memory() -> None:
    config = WorkerConfig("out", "out/.logs", source=MIX, zoo_share=0.5, timeout_s=60.0, memory_mb=4096,
                          zoo_timeout_s=300.0, zoo_memory_mb=16384)
    zoo_seed = next(s for s in SEEDS if config.source_for(s) is SourceKind.ZOO)
    graph_seed = next(s for s in SEEDS if config.source_for(s) is SourceKind.GRAPHS)
    assert config.limits_for(zoo_seed) == (300.0, 16384)
    assert config.limits_for(graph_seed) == config.limits_for(None) == (60.0, 4096)
    assert config.address_space_mb == 16384  # one process runs both kinds of unit
    assert WorkerConfig("o", "o", memory_mb=0, zoo_memory_mb=16384).address_space_mb == 0  # unlimited stays so
    assert WorkerConfig("o", "o", memory_mb=4096).address_space_mb == 4096
    assert WorkerConfig.from_json(config.to_json()) == config


def test_the_mix_has_no_zoo_share_where_the_zoo_cannot_run() -> None:
    every = tuple(CONVERTERS)
    assert mix_zoo_share(MIX, DEFAULT_REGISTRY, every, zoo_entries()) == ZOO_SHARE
    assert mix_zoo_share("graphs", DEFAULT_REGISTRY, every, zoo_entries()) == 0.0
    assert mix_zoo_share(MIX, DEFAULT_REGISTRY, every, []) == 0.0  # the zoo extra is not installed
    keras = [e for e in zoo_entries() if e.framework is Framework.KERAS]
    assert mix_zoo_share(MIX, DEFAULT_REGISTRY, ("torch-onnx-dynamo", "ort-optimizer"), keras) == 0.0
    assert mix_zoo_share(MIX, DEFAULT_REGISTRY, ("tf2onnx",), keras) == ZOO_SHARE


@pytest.mark.slow
def test_a_mixed_worker_runs_a_zoo_seed_as_a_zoo_unit_and_a_graph_seed_as_a_graph(tmp_path: Path) -> None:
    config = WorkerConfig(str(tmp_path), str(tmp_path / LOG_DIR), source=MIX, zoo_share=0.5)
    zoo_seed = next(s for s in SEEDS if config.source_for(s) is SourceKind.ZOO)
    graph_seed = next(s for s in SEEDS if config.source_for(s) is SourceKind.GRAPHS)
    for idx, seed in enumerate((zoo_seed, graph_seed)):
        sent = Collected()
        UnitRunner(config, CONVERTERS, sent).run_unit(idx, seed, ("tf2onnx",))
        prepared = next(m for m in sent.messages if isinstance(m, UnitPrepared))
        graphs = [m for m in sent.messages if isinstance(m, UnitGraph)]
        result = next(m for m in sent.messages if isinstance(m, TestResult))
        if seed == zoo_seed:
            assert (prepared.values, graphs) == ("zoo", [])
            entry = zoo_entry_for(seed, zoo_entries())
            assert entry.framework is Framework.KERAS and f"zoo:{entry.name}" in result.labels  # tf2onnx took it
        else:
            assert prepared.values != "zoo" and len(graphs) == 1


def test_status_splits_the_worker_time_between_graphs_and_the_zoo(tmp_path: Path) -> None:
    db = CampaignDB(tmp_path / "campaign.db", create=True)
    session = db.start_session(1)
    for idx, (values, wall_s, prep) in enumerate((("uniform", 1.0, 0.5), ("zoo", 20.0, 4.0), ("special", 2.0, 0.5))):
        db.add_unit(idx, idx)
        db.set_unit_info(idx, None, {"build" if values == "zoo" else "generate": prep}, values)
        row = TestResult(idx, idx, "torch-onnx-script", "pass", "none", "", False, wall_s=wall_s)
        db.record_test(row, session, unit_done=True)
    db.end_session(session, "finished")
    found = tallies.read(db.conn, tallies.Kind.SOURCE)
    assert found == {"graphs": (2, 0, 4.0), "zoo": (1, 0, 24.0)}
    summary = summarize(db)
    assert summary["sources"] == {"graphs": {"units": 2, "worker_s": 4.0}, "zoo": {"units": 1, "worker_s": 24.0}}
    assert "units by source: graphs 2 (14% of their worker time), zoo 1 (86% of their worker time)" in format_summary(
        summary)
    tallies.fill(db.conn, db.campaign_started())
    assert tallies.read(db.conn, tallies.Kind.SOURCE) == found
    db.close()


def _spec(out: Path, *argv: str) -> WorkerConfig:
    """The worker config `convsmith fuzz ARGV` records for a new campaign (nothing run)."""
    parser = argparse.ArgumentParser()
    fuzz.add_arguments(parser)
    _, db, spec = fuzz.new_campaign(parser.parse_args([*argv, "--out", str(out)]))
    db.close()
    return spec.worker


def test_the_default_campaign_mixes_the_zoo_in_and_source_graphs_or_ops_keeps_graphs_only(tmp_path: Path) -> None:
    mixed = _spec(tmp_path / "mix", "--converters", "torch-onnx-dynamo,ort-optimizer")
    assert (mixed.source, mixed.zoo_share, mixed.timeout_s, mixed.memory_mb) == (MIX, ZOO_SHARE, 60.0, 4096)
    assert (mixed.zoo_timeout_s, mixed.zoo_memory_mb) == (300.0, 16384)
    graphs = _spec(tmp_path / "graphs", "--source", "graphs", "--converters", "torch-onnx-dynamo")
    assert (graphs.source, graphs.zoo_share, graphs.zoo_timeout_s, graphs.zoo_memory_mb) == ("graphs", 0.0, None, None)
    narrowed = _spec(tmp_path / "ops", "--ops", "relu", "--converters", "torch-onnx-dynamo")
    assert (narrowed.source, narrowed.zoo_share) == (MIX, 0.0)
    assert {narrowed.source_for(s) for s in SEEDS} == {graphs.source_for(s) for s in SEEDS} == {SourceKind.GRAPHS}
