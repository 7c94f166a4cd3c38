"""Steering to (rewrite, class) pairs never fired: the targets a fired rewrite leaves, the units steered to one and
what their graphs are made of, the attempts recorded per test, and a pair learned unreachable dropped."""

from __future__ import annotations

from pathlib import Path

from fuzzer.campaign.class_coverage import LEARNED_AFTER, attempts, class_counts, class_coverage
from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.policy.class_steering import (
    STEER_SHARE,
    ClassSteering,
    Target,
    steered_key,
    steered_options,
    steered_target,
)
from fuzzer.campaign.policy.novelty import STEER
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import CONVERTERS
from fuzzer.converters.upstream import native_seed
from generators.dtypes import DType
from generators.generator import GenOptions, admits_an_operator, generate

BN = {"fuse_bn_into_conv": ("float32", "op:Conv", "op:BatchNormalization")}
FLOAT16 = ("steer", "onnxoptimizer|fuse_bn_into_conv|float16|pattern_conv_bn", 1.0)


def _pairs(targets: list) -> set[str]:
    """The 'converter|rewrite|class' of each target (the operators it boosts aside)."""
    return {"|".join(detail.split("|")[:3]) for _, detail, _ in targets}


PAIR = "onnxoptimizer|fuse_bn_into_conv|float16"


def _fired() -> ClassSteering:
    steering = ClassSteering()
    steering.record(TestResult(0, 0, "onnxoptimizer", "ok", "none", rewrite_classes=BN))
    return steering


def test_a_fired_rewrite_leaves_the_classes_its_operators_can_meet_as_targets() -> None:
    targets = _fired().targets(["onnxoptimizer"])
    # Its pattern, then the operators written with Conv (BatchNormalization's have no generator operator).
    boosted = "pattern_conv_bn,conv1d,conv2d,conv3d,pattern_conv_activation,pattern_conv_add"
    assert [d for _, d, _ in targets] == [f"onnxoptimizer|fuse_bn_into_conv|{c}|{boosted}"
                                          for c in ("float64", "float16")]
    assert _fired().targets(["onnxsim"]) == []  # a converter the campaign does not run


def test_a_share_of_units_is_steered_and_each_to_one_target_by_its_seed() -> None:
    demoted = [("boost", "pattern_conv_bn", 1.0), FLOAT16]
    picks = [steered_target(seed, demoted) for seed in range(2000)]
    assert abs(sum(p is not None for p in picks) / len(picks) - STEER_SHARE) < 0.03
    assert {p for p in picks if p is not None} == {Target("onnxoptimizer", "fuse_bn_into_conv", "float16",
                                                          ("pattern_conv_bn",))}
    assert steered_target(7, demoted) == steered_target(7, demoted) and steered_target(7, []) is None
    seed = next(s for s in range(100) if picks[s] is not None)
    assert steered_key(seed, demoted) == FLOAT16[1] and steered_key(seed, []) == ""


def test_a_steered_unit_is_made_of_its_class_and_draws_its_patterns_more() -> None:
    target = Target.of_detail(FLOAT16[1])
    opts = steered_options(GenOptions(nodes=4), target)
    assert opts.dtypes == (DType.FLOAT16,) and opts.boosted_ops == {"pattern_conv_bn"}
    graph = generate(3, opts)
    assert {graph.types[name].dtype for name in graph.inputs} == {DType.FLOAT16}
    unsteerable = steered_options(GenOptions(), Target("onnxsim", "x", "rank0", ("pattern_gelu",)))
    assert unsteerable.dtypes == GenOptions().dtypes and unsteerable.boosted_ops == {"pattern_gelu"}
    narrowed = GenOptions(dtypes=(DType.FLOAT32,))
    assert steered_options(narrowed, target).dtypes == (DType.FLOAT32,)  # a dtype the campaign does not make


def test_the_worker_generates_a_steered_seed_under_its_target_and_starts_its_tool_from_the_native_model() -> None:
    config = WorkerConfig(out_dir="unused", log_dir="unused", converters=("onnxoptimizer", "onnxsim"))
    seed = next(s for s in range(100) if steered_target(s, [FLOAT16]) is not None and not native_seed(s))
    opts = config.unit_gen_options(seed, [FLOAT16])
    assert opts.dtypes == (DType.FLOAT16,) and opts.include_ops  # narrowed to operators with an ONNX counterpart
    graph = generate(seed, opts)
    assert config.options_for(CONVERTERS["onnxoptimizer"], seed, graph, [FLOAT16])["upstream"] == "onnx-native"
    onnxsim = CONVERTERS["onnxsim"]  # not the target's tool: its options are drawn as for any unit
    assert config.options_for(onnxsim, seed, graph, [FLOAT16]) == config.options_for(onnxsim, seed, graph)
    plain = next(s for s in range(100) if steered_target(s, [FLOAT16]) is None)
    assert config.unit_gen_options(plain, [FLOAT16]).dtypes == config.unit_gen_options(plain).dtypes


def test_a_pair_every_attempt_of_which_ended_before_the_tool_is_learned_unreachable(tmp_path: Path) -> None:
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    session = db.start_session(1)
    db.record_test(TestResult(0, 0, "onnxoptimizer", "ok", "none", rewrites=tuple(BN), rewrite_classes=BN),
                   session, False)
    for idx in range(1, LEARNED_AFTER + 1):  # each ended at the source: its upstream model failed to run
        db.record_test(TestResult(idx, idx, "onnxoptimizer", "unsupported", "source", steered=FLOAT16[1]),
                       session, False)
    db.record_test(TestResult(9, 9, "onnxsim", "ok", "none", steered=FLOAT16[1]), session, False)  # not its pair
    tried = attempts(db.conn)
    assert tried == {"onnxoptimizer": {("fuse_bn_into_conv", "float16"): (LEARNED_AFTER, 0, 0)}}
    steering = ClassSteering.from_db(db)
    assert PAIR not in _pairs(steering.targets(["onnxoptimizer"]))
    assert "onnxoptimizer|fuse_bn_into_conv|float64" in _pairs(steering.targets(["onnxoptimizer"]))
    cov = class_coverage(("fuse_bn_into_conv",), class_counts(db.conn)["onnxoptimizer"], {},
                         tried["onnxoptimizer"], 1 + LEARNED_AFTER)
    assert cov.excluded["fuse_bn_into_conv", "float16"] == \
        f"learned: all {LEARNED_AFTER} tests steered to it ended before the rewrite ran"
    assert cov.steered == (LEARNED_AFTER, 0, 0) and "3 tests (75% of its 4) steered" in cov.summary()
    db.close()


def test_steering_learns_live_from_results_as_from_the_database() -> None:
    steering = _fired()
    for idx in range(LEARNED_AFTER):
        steering.record(TestResult(idx, idx, "onnxoptimizer", "unsupported", "source", steered=FLOAT16[1]))
    assert PAIR in _pairs(_fired().targets(["onnxoptimizer"]))
    assert PAIR not in _pairs(steering.targets(["onnxoptimizer"]))
    reached = _fired()
    reached.record(TestResult(1, 1, "onnxoptimizer", "ok", "none", steered=FLOAT16[1],
                              rewrite_classes={"fuse_bn_into_conv": ("float16",)}))
    assert PAIR not in _pairs(reached.targets(["onnxoptimizer"]))  # fired: no longer a target
    assert STEER == FLOAT16[0]


def test_a_target_the_demotions_leave_no_operator_for_is_not_steered_to_and_the_unit_still_generates() -> None:
    """The steered dtype narrowed to operators whose every float16 signature the campaign demoted: steering would
    leave the generator nothing to draw (GenerationError, an own error of the campaign), so the unit is not steered."""
    config = WorkerConfig(out_dir="unused", log_dir="unused", converters=("onnxoptimizer", "onnxsim"))
    seed = next(s for s in range(100) if steered_target(s, [FLOAT16]) is not None and not native_seed(s))
    steered = config.unit_gen_options(seed, [FLOAT16])
    every_float16 = [(op, "float16", 1.0) for op in steered.include_ops]
    opts = config.unit_gen_options(seed, [FLOAT16, *every_float16])
    assert admits_an_operator(opts) and DType.FLOAT32 in opts.dtypes  # the unsteered dtypes
    assert generate(seed, opts).nodes
