"""A root cause a converter setting avoids (a type the operator's schema takes only from a later opset) is demoted
by that setting: once hit often, tests of graphs holding the type run at the opset that allows it, or are skipped as
known where the converter exports no such opset. The exporter is planted through a registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import Campaign
from fuzzer.campaign.policy.novelty import AVOID_PROBABILITY_SETTING, HITS_TO_DEMOTE, RAISE_ONLY, SETTING, Novelty
from fuzzer.campaign.policy.settings import SKIPPED, setting_detail, settled_options, unexportable_dtypes
from fuzzer.campaign.policy.traits import TRAIT
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.converters import CONVERTERS, ConverterRegistry
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, StageError, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.torch_onnx_dynamo import DynamoOptions
from fuzzer.support.tensors import to_oracle_array
from generators.builder import GraphBuilder
from generators.dtypes import DType
from oracles.taxonomy import Failure
from oracles.verdict import Stage

BELOW = ("onnx.onnx_cpp2py_export.shape_inference.InferenceError: [ShapeInferenceError] (op_type:Tan, node name: "
         "/Tan): input typestr: T, has unsupported type: tensor(bfloat16)")


class Bfloat16BelowOpset22(Converter):
    """Emits bfloat16 to an operator that takes it from opset 22 only: every bfloat16 graph fails below it."""

    name = "planted-bfloat16-opset"
    libraries = ()
    distributions = ()
    options_type = DynamoOptions

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        held = {t.dtype for t in source.graph.types.values()}
        if DType.BFLOAT16 in held and options.opset < 22:  # type: ignore[attr-defined]
            raise StageError(Failure(Stage.VALIDATION, "onnx.onnx_cpp2py_export.shape_inference.InferenceError",
                                     BELOW.split(": ", 1)[1], ""))
        pairs = [to_oracle_array(x) for x in source.module(*source.inputs)]
        return TargetRun(tuple(a for a, _ in pairs), tuple(d for _, d in pairs), dict(Steps().timings))


REGISTRY = ConverterRegistry([Bfloat16BelowOpset22()])


def bfloat16_graph():
    b = GraphBuilder()
    x = b.input((3,), DType.BFLOAT16)
    return b.build((b.op("neg", (x,), (3,), DType.BFLOAT16),))


def test_the_schema_note_names_the_setting() -> None:
    message = BELOW + " [ONNX's Tan takes tensor(bfloat16) from opset 22]"
    assert setting_detail("torch-onnx-dynamo", message) == "torch-onnx-dynamo|bfloat16|22"
    assert setting_detail("torch-onnx-dynamo", BELOW) is None  # no note: nothing to go on


def test_the_setting_is_demoted_after_its_hits_and_survives_a_resume() -> None:
    novelty = Novelty()
    for _ in range(HITS_TO_DEMOTE - 1):
        novelty.record_setting("torch-onnx-dynamo|bfloat16|22")
    assert novelty.demotions() == []
    novelty.record_setting("torch-onnx-dynamo|bfloat16|22")
    assert novelty.demotions() == [(SETTING, "torch-onnx-dynamo|bfloat16|22", AVOID_PROBABILITY_SETTING)]
    again = Novelty.from_tally(json.loads(json.dumps(novelty.tally())))
    assert again.demotions() == novelty.demotions()


def test_a_demoted_setting_raises_the_opset_or_skips_where_none_allows_it() -> None:
    graph, demoted = bfloat16_graph(), [(SETTING, "torch-onnx-dynamo|bfloat16|22", 1.0)]
    dynamo, script = CONVERTERS["torch-onnx-dynamo"], CONVERTERS["torch-onnx-script"]
    assert settled_options(dynamo, {"opset": 18}, graph, 1, demoted) == ({"opset": 22}, None)
    assert settled_options(script, {"opset": 17}, graph, 1, demoted) == ({"opset": 17}, None)  # not its root cause
    tool = CONVERTERS["onnxsim"]
    assert settled_options(tool, {"upstream": "torch-onnx-dynamo", "opset": 18}, graph, 1, demoted)[0]["opset"] == 22
    beyond = [(SETTING, "torch-onnx-dynamo|bfloat16|24", 1.0)]
    options, skip = settled_options(dynamo, {"opset": 18}, graph, 1, beyond)
    assert options == {"opset": 18} and skip is not None and "up to 23" in skip


def test_a_setting_that_would_skip_tests_few_of_which_hit_its_bug_only_raises_the_opset() -> None:
    """Three hits among a thousand of the dynamo exporter's bfloat16 tests: its tests are not all skipped for it."""
    novelty = Novelty()
    for _ in range(1000):
        novelty.seen("torch-onnx-dynamo", [(TRAIT, "dtype:bfloat16")])
    for _ in range(4):
        novelty.seen("torch-onnx-script", [(TRAIT, "dtype:bfloat16")])
    for detail in ("torch-onnx-dynamo|bfloat16|24", "torch-onnx-script|bfloat16|22"):
        for _ in range(HITS_TO_DEMOTE):
            novelty.record_setting(detail)
    assert novelty.demotions() == [
        (SETTING, f"torch-onnx-dynamo|bfloat16|24|{RAISE_ONLY}", AVOID_PROBABILITY_SETTING),
        (SETTING, "torch-onnx-script|bfloat16|22", AVOID_PROBABILITY_SETTING)]  # 3 of its 4 bfloat16 tests
    graph, dynamo = bfloat16_graph(), CONVERTERS["torch-onnx-dynamo"]
    raise_only = [(SETTING, f"torch-onnx-dynamo|bfloat16|24|{RAISE_ONLY}", 1.0)]
    assert settled_options(dynamo, {"opset": 18}, graph, 1, raise_only) == ({"opset": 18}, None)
    assert settled_options(dynamo, {"opset": 18}, graph, 1, [(SETTING, f"torch-onnx-dynamo|bfloat16|22|{RAISE_ONLY}",
                                                               1.0)]) == ({"opset": 22}, None)
    assert unexportable_dtypes([CONVERTERS["torch-onnx-script"]], 5,
                               [(SETTING, f"torch-onnx-script|bfloat16|22|{RAISE_ONLY}", 1.0)]) == set()


def test_a_dtype_every_converter_would_skip_is_not_generated(tmp_path: Path) -> None:
    """The TorchScript exporter exports up to opset 20: a bfloat16 graph of a campaign that runs it alone is skipped
    as a known root cause once that setting is demoted, so its graphs are generated without bfloat16; beside a
    converter that can test bfloat16 (the dynamo exporter, an ONNX tool) they keep it."""
    script, dynamo, tool = CONVERTERS["torch-onnx-script"], CONVERTERS["torch-onnx-dynamo"], CONVERTERS["onnxsim"]
    beyond = [(SETTING, "torch-onnx-script|bfloat16|22", 1.0)]
    assert unexportable_dtypes([script], 5, beyond) == {"bfloat16"}
    assert unexportable_dtypes([script, dynamo], 5, beyond) == set()
    assert unexportable_dtypes([script, tool], 5, beyond) == set()
    assert unexportable_dtypes([dynamo], 5, [(SETTING, "torch-onnx-dynamo|bfloat16|22", 1.0)]) == set()  # raised
    assert unexportable_dtypes([script], 5, [(SETTING, "torch-onnx-script|bfloat16|22", 0.0)]) == set()  # not drawn
    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), converters=(script.name,))
    assert DType.BFLOAT16 in worker.unit_gen_options(5).dtypes
    assert DType.BFLOAT16 not in worker.unit_gen_options(5, beyond).dtypes
    assert worker.unit_gen_options(5, beyond).dtypes == tuple(d for d in worker.gen_options(5).dtypes
                                                              if d is not DType.BFLOAT16)


@pytest.mark.slow
def test_known_failures_stop_eating_the_budget_once_their_setting_is_demoted(tmp_path: Path) -> None:
    worker = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR),
                          registry="test_settings_demotion:REGISTRY", min_nodes=1, nodes=2, include_ops=("neg", "abs"),
                          dtypes=("bfloat16",), check={"input_budget_s": 0.2}, demote_known=True)
    spec = CampaignSpec(0, (Bfloat16BelowOpset22.name,), worker, 30)
    db = CampaignDB(tmp_path / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(tmp_path, spec, db, 1).run() == "finished"
    rows = db.conn.execute("SELECT idx, symptom, options FROM tests ORDER BY idx").fetchall()
    bugs = [idx for idx, symptom, _ in rows if symptom == "invalid_model"]
    assert len(bugs) >= HITS_TO_DEMOTE
    demoted_after = bugs[HITS_TO_DEMOTE - 1]
    later = [(symptom, json.loads(options)["opset"]) for idx, symptom, options in rows if idx > demoted_after]
    # After the demotion, nineteen in twenty tests run at opset 22 and pass; the rest still show whether it was fixed.
    assert later and sum(s == "pass" and opset == 22 for s, opset in later) >= len(later) * 0.8
    labels = {label for (text,) in db.conn.execute("SELECT labels FROM tests") for label in json.loads(text)}
    assert SKIPPED not in labels  # every demoted test could be raised to opset 22, none had to be skipped
