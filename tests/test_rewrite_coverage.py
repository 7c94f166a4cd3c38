"""Which rewrites of the ONNX tools fired, measured on real library runs: ONNX Runtime's transformers from its own log,
onnxoptimizer's passes by running each; recorded per test, summed by `status` and `convsmith ops --coverage DIR`
beside the list the installed library has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import Campaign
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.onnx_optimizer import fuse_and_elimination_passes
from fuzzer.converters.runtime import graph_transformers
from generators.dtypes import DType
from generators.generator import GenOptions, generate

TOOLS = ("ort-optimizer", "onnxoptimizer")
FUSED = ("pattern_conv_activation", "pattern_matmul_add", "pattern_conv_bn", "pattern_unsqueeze_pair")


def test_the_installed_runtime_lists_its_transformers_and_a_fusion_fires() -> None:
    known = graph_transformers()
    assert {"ConstantFolding", "ConvActivationFusion", "MatMulAddFusion", "Level1_RuleBasedTransformer"} <= set(known)
    graph = generate(1, GenOptions(nodes=1, include_ops=("pattern_conv_activation",), dtypes=("float32",)))
    run = check_prepared(prepare(graph, 1, {}, 1.0), CONVERTERS["ort-optimizer"], {"level": "all"}).target
    assert run is not None and "ConvActivationFusion" in run.rewrites and set(run.rewrites) <= set(known)


def test_onnxoptimizer_passes_that_change_the_model_are_the_ones_recorded() -> None:
    graph = generate(2, GenOptions(nodes=1, include_ops=("pattern_unsqueeze_pair",), dtypes=("float32",)))
    run = check_prepared(prepare(graph, 2, {}, 1.0), CONVERTERS["onnxoptimizer"]).target
    assert run is not None and "fuse_consecutive_unsqueezes" in run.rewrites
    assert set(run.rewrites) <= set(fuse_and_elimination_passes()) and "nop" not in run.rewrites


@pytest.mark.slow
def test_a_campaign_records_them_and_status_and_ops_show_them(tmp_path: Path, capsys) -> None:
    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), min_nodes=1, nodes=3,
                          include_ops=FUSED, dtypes=("float32",), check={"input_budget_s": 0.2}, converters=TOOLS)
    spec = CampaignSpec(40, TOOLS, worker, 4)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1).run() == "finished"
    fired = db.conn.execute("SELECT converter, COUNT(DISTINCT rewrite) FROM rewrites GROUP BY converter").fetchall()
    assert {c for c, n in fired if n > 0} == set(TOOLS)
    db.close()
    assert main(["ops", "--coverage", str(tmp_path), "--json"]) == 0
    rows = {r["converter"]: r for r in json.loads(capsys.readouterr().out)["rewrites"]}
    assert set(rows) == set(TOOLS)  # a tool the campaign never ran has no coverage to show
    ort = rows["ort-optimizer"]
    assert ort["known"] == len(graph_transformers()) and 0 < ort["fired_share"] < 1
    assert all(r["known"] for r in ort["rewrites"] if r["fired"])
    assert rows["onnxoptimizer"]["known"] == len(fuse_and_elimination_passes())
    assert main(["status", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "rewrites of the ONNX tools fired" in text and "  ort-optimizer: " in text
    assert "tests by the exporter model they ran" in text


def test_the_torchscript_exporter_runs_on_a_share_of_graphs_where_the_dynamo_exporter_runs_too(tmp_path: Path) -> None:
    from fuzzer.campaign.spec import SCRIPT_SHARE, CampaignSpec

    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR))
    both = CampaignSpec(0, ("torch-onnx-script", "torch-onnx-dynamo", "onnxsim"), worker, script_share=SCRIPT_SHARE)
    runs = [("torch-onnx-script" in both.converters_for(seed)) for seed in range(3000)]
    assert abs(sum(runs) / len(runs) - SCRIPT_SHARE) < 0.03
    assert all({"torch-onnx-dynamo", "onnxsim"} <= set(both.converters_for(seed)) for seed in range(100))
    alone = CampaignSpec(0, ("torch-onnx-script", "onnxsim"), worker, script_share=SCRIPT_SHARE)
    assert all("torch-onnx-script" in alone.converters_for(seed) for seed in range(100))
    older = {k: v for k, v in both.to_json().items() if k != "script_share"}  # recorded before the split
    assert CampaignSpec.from_json(older, tmp_path).script_share == 1.0


def test_patterns_whose_rewrite_has_not_fired_are_boosted_until_it_has() -> None:
    from fuzzer.campaign.policy.novelty import BOOST
    from fuzzer.campaign.policy.steering import FIRED_ENOUGH, Steering

    steering = Steering()
    boosted = {name for kind, name, _ in steering.boosts(TOOLS)}
    assert {"pattern_gelu", "pattern_conv_bn", "pattern_layer_norm"} <= boosted
    assert all(kind == BOOST for kind, _, _ in steering.boosts(TOOLS))
    assert steering.boosts(("torch-onnx-dynamo",)) is steering.boosts(TOOLS)  # one campaign, one converter set
    for _ in range(FIRED_ENOUGH):
        steering.record("ort-optimizer", ["GeluFusionL2"])
    assert "pattern_gelu" not in {name for _, name, _ in steering.boosts(TOOLS)}
    assert Steering().boosts(("torch-onnx-dynamo",)) == []  # no ONNX tool: nothing to steer


@pytest.mark.slow
def test_a_boosted_operator_is_drawn_about_four_times_as_often() -> None:
    from fuzzer.campaign.policy.novelty import BOOST, without_demoted
    from generators.generator import BOOST_WEIGHT

    ops = ("neg", "abs", "relu", "sin")
    plain = GenOptions(nodes=4, include_ops=ops, dtypes=(DType.FLOAT32,))
    boosted = without_demoted(plain, 0, [(BOOST, "sin", 1.0)])
    assert boosted.boosted_ops == frozenset({"sin"})

    def share(options: GenOptions) -> float:
        drawn = [op for seed in range(150) for op in generate(seed, options).ops()]
        return drawn.count("sin") / len(drawn)

    base, more = share(plain), share(boosted)
    expected = BOOST_WEIGHT / (BOOST_WEIGHT + len(ops) - 1)
    assert abs(base - 1 / len(ops)) < 0.06 and abs(more - expected) < 0.08


def test_onnxslim_patterns_its_matcher_finds_are_the_ones_recorded() -> None:
    graph = generate(1, GenOptions(nodes=1, include_ops=("pattern_matmul_add",), dtypes=(DType.FLOAT32,)))
    slim = CONVERTERS["onnxslim"]
    run = check_prepared(prepare(graph, 1, {}, 1.0), slim).target
    assert run is not None and "FusionGemm" in run.rewrites and set(run.rewrites) <= set(slim.rewrite_names())


def test_transformers_that_cannot_fire_on_the_cpu_are_the_installed_runtimes_and_left_out_of_the_shares() -> None:
    from fuzzer.campaign.rewrites import RewriteCoverage

    ort, known = CONVERTERS["ort-optimizer"], graph_transformers()
    out = ort.rewrites_out_of_reach("cpu")
    assert out and set(out) <= set(known)  # a transformer renamed or gone in a new release shows here
    assert ort.rewrites_out_of_reach("cuda") == {}
    beyond = ort.rewrites_beyond_float()
    assert {"QDQPropagationTransformer", "NhwcTransformer", "MatMulNBitsFusion"} <= beyond
    assert not beyond & {"ConvActivationFusion", "GeluFusionL2", "ConstantFolding"}
    row = RewriteCoverage("ort-optimizer", known, {"ConvActivationFusion": 3, "QDQPropagationTransformer": 1}, {},
                          out, beyond)
    assert row.reachable == tuple(n for n in known if n not in out)
    assert row.share == 2 / len(row.reachable) and row.float_share == 1 / len(row.float_rewrites)
    assert len(row.float_rewrites) == len(row.reachable) - len(beyond - set(out))
    assert row.summary().endswith(f"; {len(out)} more cannot fire in this campaign")
