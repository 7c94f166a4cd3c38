"""(rewrite, edge-case class) coverage: classes recorded per test by a real tool run, stored and summed from the
campaign database, the reachable pairs with their exclusions, and `convsmith ops --coverage --json` reading them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fuzzer.campaign.class_coverage import LEARNED_AFTER, attempts, bug_classes, class_counts, class_coverage
from fuzzer.campaign.class_tallies import CLASSES_META
from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.result import TestResult
from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.edge_classes import EdgeClass
from generators.generator import GenOptions, generate


def test_a_real_fusion_records_the_dtype_it_fired_on() -> None:
    graph = generate(2, GenOptions(nodes=1, include_ops=("pattern_unsqueeze_pair",), dtypes=("float16",)))
    run = check_prepared(prepare(graph, 2, {}, 1.0), CONVERTERS["onnxoptimizer"]).target
    assert run is not None and "fuse_consecutive_unsqueezes" in run.rewrites
    found = run.rewrite_classes["fuse_consecutive_unsqueezes"]
    assert "float16" in found and "op:Unsqueeze" in found and "float32" not in found


def _result(idx: int, classes: dict[str, tuple[str, ...]], bug: bool = False) -> TestResult:
    return TestResult(idx, idx, "onnxoptimizer", "bug" if bug else "ok", "none", is_bug=bug,
                      rewrites=tuple(classes), rewrite_classes=classes)


def test_classes_round_trip_through_the_worker_message_and_the_database(tmp_path: Path) -> None:
    row = _result(0, {"fuse_bn_into_conv": ("float16", "op:Conv", "op:BatchNormalization")}, bug=True)
    assert TestResult.from_message(json.loads(json.dumps(row.to_message()))) == row
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    session = db.start_session(1)
    db.record_test(row, session, False)
    db.record_test(_result(1, {"fuse_bn_into_conv": ("float16",), "eliminate_identity": ("bool",)}), session, False)
    assert class_counts(db.conn)["onnxoptimizer"] == {
        ("fuse_bn_into_conv", "float16"): (2, 1), ("fuse_bn_into_conv", "op:Conv"): (1, 1),
        ("fuse_bn_into_conv", "op:BatchNormalization"): (1, 1), ("eliminate_identity", "bool"): (1, 0)}
    db.close()


def test_a_campaign_folder_written_before_classes_reads_with_none(tmp_path: Path) -> None:
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.conn.execute("DROP TABLE rewrite_classes")
    db.close()
    reopened = CampaignDB(tmp_path / DB_NAME)
    assert class_counts(reopened.conn) == {}
    reopened.close()


def test_reachable_pairs_leave_out_what_the_operators_and_the_tool_cannot_meet() -> None:
    counts = {("fuse_bn_into_conv", "float32"): (3, 0), ("fuse_bn_into_conv", "op:Conv"): (3, 0),
              ("fuse_bn_into_conv", "op:BatchNormalization"): (3, 0), ("conv", "op:Conv"): (1, 0)}
    tried = {("never", "rank0"): (LEARNED_AFTER, 0, 0), ("never", "rank1"): (LEARNED_AFTER, 1, 0)}
    cov = class_coverage(("fuse_bn_into_conv", "conv", "never"), counts, {"in_subgraph": "not measured"}, tried)
    excluded = cov.excluded
    assert excluded["fuse_bn_into_conv", "bool"] == \
        "learned: its operators (BatchNormalization, Conv) take no bool in ONNX's schemas"
    assert excluded["conv", "float64"] == \
        "learned: no CPU kernel of ONNX Runtime's for its operators (Conv) takes float64"
    assert ("conv", "float16") not in excluded  # ONNX Runtime casts float16 around a float kernel
    assert excluded["conv", "broadcast"] == "learned: its operators (Conv) do not broadcast"
    assert excluded["never", "in_subgraph"] == "not measured"
    assert excluded["never", "rank0"].startswith(f"learned: all {LEARNED_AFTER} tests steered")
    assert ("never", "rank1") not in excluded and ("never", "bool") not in excluded  # nothing learned of its ops
    reachable = len(EdgeClass) * 3 - len(excluded)
    assert len(cov.reachable) == reachable and cov.share == 1 / reachable
    assert cov.of_rewrite("fuse_bn_into_conv")[0] == ("float32",)


def test_ops_coverage_json_reports_fired_and_never_fired_pairs(tmp_path: Path, capsys) -> None:
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    session = db.start_session(1)
    db.record_test(_result(0, {"fuse_bn_into_conv": ("float16", "op:Conv")}), session, True)
    db.close()
    assert main(["ops", "--coverage", str(tmp_path), "--json"]) == 0
    rows = {r["converter"]: r for r in json.loads(capsys.readouterr().out)["rewrites"]}
    pairs = rows["onnxoptimizer"]["pairs"]
    assert pairs["fired"] == [{"rewrite": "fuse_bn_into_conv", "class": "float16", "tests": 1, "bugs": 0}]
    assert {"rewrite": "fuse_bn_into_conv", "class": "rank0"} in pairs["never_fired"]
    assert {"rewrite": "eliminate_identity", "class": "float16"} in pairs["never_fired"]
    assert 0 < pairs["fired_share"] < 0.01 and pairs["reachable"] == len(pairs["never_fired"]) + 1
    assert main(["ops", "--coverage", str(tmp_path)]) == 0
    assert "reachable (rewrite, class) pairs fired" in capsys.readouterr().out


def test_a_bug_is_named_with_the_pairs_every_test_that_hit_it_fired(tmp_path: Path) -> None:
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    session = db.start_session(1)
    for idx, classes in enumerate((("int64", "rank1", "op:Neg"), ("int64", "second_consumer"))):
        row = dataclasses.replace(_result(idx, {"eliminate_identity": classes}, bug=True), signature="sig")
        db.record_test(row, session, False)
    assert bug_classes(db.conn) == {"onnxoptimizer": {"sig": (("eliminate_identity", "int64"),)}}
    db.close()


def test_the_writing_campaigns_tallies_agree_with_the_rows(tmp_path: Path) -> None:
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    session = db.start_session(1)
    target = "onnxoptimizer|fuse_bn_into_conv|float16|"
    db.record_test(dataclasses.replace(_result(0, {"fuse_bn_into_conv": ("float16", "op:Conv")}), steered=target),
                   session, False)
    from_rows = (class_counts(db.conn), attempts(db.conn))
    assert from_rows[1] == {"onnxoptimizer": {("fuse_bn_into_conv", "float16"): (1, 1, 1)}}
    db.keep_class_tallies()  # filled from the rows once
    assert (class_counts(db.conn), attempts(db.conn)) == from_rows
    db.record_test(dataclasses.replace(_result(1, {"eliminate_identity": ("bool",)}, bug=True), steered=target),
                   session, False)  # added to the tallies as it is recorded
    db.conn.execute("DELETE FROM meta WHERE key = ?", (CLASSES_META,))
    again = (class_counts(db.conn), attempts(db.conn))  # the rows
    db.set_meta(CLASSES_META, True)
    assert (class_counts(db.conn), attempts(db.conn)) == again
    assert again[1]["onnxoptimizer"]["fuse_bn_into_conv", "float16"] == (2, 2, 1)
    db.close()
