"""Avoidance per converter: a graph holding an (operator, dtype) pair one converter is known not to take still goes
to every other converter; only that converter's test (and that of a tool starting from it) is skipped, counted as
unsupported and never as having run its converter."""

from __future__ import annotations

import pytest

from fuzzer.campaign.mailbox import Collected
from fuzzer.campaign.messages import to_json
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.worker import UnitRunner
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.commands.fuzz_flags import never_generated
from fuzzer.converters import CONVERTERS
from fuzzer.converters.upstream import upstream_opsets

SKIP = {"torch-onnx-script": (("abs", "float32"),)}


def _results(tmp_path, converters: tuple[str, ...], pinned: dict) -> dict[str, dict]:
    config = WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / "logs"), nodes=1, min_nodes=1,
                          include_ops=("abs",), dtypes=("float32",), skip_pairs=SKIP, converter_options=pinned,
                          check={"input_budget_s": 0.2})
    # A graph not among those kept free of the refused pairs (worker.SPARED_SHARE): the first such seed, found.
    unspared = next(s for s in range(100) if ("abs", "float32") not in config.gen_options(s).avoid_pairs)
    sent = Collected()
    UnitRunner(config, CONVERTERS, sent).run_unit(0, unspared, converters)
    return {m.converter: to_json(m) for m in sent.messages if isinstance(m, TestResult)}


@pytest.mark.slow
def test_only_the_converter_known_not_to_take_the_pair_is_skipped(tmp_path) -> None:
    pinned = {"onnxslim": {"upstream": "torch-onnx-script"}, "onnxsim": {"upstream": "torch-onnx-dynamo",
                                                                         "opset": 18}}
    results = _results(tmp_path, ("torch-onnx-script", "onnxslim", "onnxsim", "torch-onnx-dynamo"), pinned)
    for skipped in ("torch-onnx-script", "onnxslim"):  # onnxslim starts from the TorchScript export here
        assert results[skipped]["symptom"] == "unsupported" and results[skipped]["stage"] == "source"
        assert results[skipped]["labels"] == ["skipped-known-unsupported"]
        assert "abs float32" in results[skipped]["message"]
    for ran in ("onnxsim", "torch-onnx-dynamo"):
        assert results[ran]["symptom"] == "pass" and results[ran]["stage"] != "source"


def test_a_pair_is_kept_out_of_the_graphs_only_when_no_converter_of_the_campaign_takes_it() -> None:
    skip = {"a": (("abs", "float32"), ("cos", "int32")), "b": (("abs", "float32"),)}
    assert never_generated(skip, ("a",)) == (("abs", "float32"), ("cos", "int32"))
    assert never_generated(skip, ("a", "b")) == (("abs", "float32"),)
    assert never_generated(skip, ("a", "b", "c")) == ()  # c has no probe: it takes everything
    assert never_generated({}, ("a",)) == ()


def test_an_onnx_tool_starts_from_the_exporter_that_takes_the_graph() -> None:
    from generators.dtypes import DType
    from generators.generator import GenOptions, generate

    graph = generate(0, GenOptions(nodes=1, include_ops=("abs",), dtypes=(DType("float32"),)))
    config = WorkerConfig(out_dir="o", log_dir="l", skip_pairs=SKIP, vary_settings=True)
    tool = CONVERTERS["onnxsim"]
    for seed in range(60):
        options = config.options_for(tool, seed, graph)
        # Never the refusing TorchScript exporter: dynamo, tf2onnx (TensorFlow writes abs) or the native model.
        assert options["upstream"] in ("torch-onnx-dynamo", "tf2onnx", "onnx-native")
        low, high = upstream_opsets(options["upstream"])
        assert low <= options["opset"] <= high
    pinned = WorkerConfig(out_dir="o", log_dir="l", skip_pairs=SKIP, vary_settings=True,
                          converter_options={"onnxsim": {"upstream": "torch-onnx-script"}})
    assert pinned.options_for(tool, 0, graph)["upstream"] == "torch-onnx-script"  # pinned: kept, then skipped


def test_half_the_graphs_are_spared_every_pair_a_probed_converter_refuses() -> None:
    config = WorkerConfig(out_dir="o", log_dir="l", skip_pairs=SKIP)
    spared = [("abs", "float32") in config.gen_options(seed).avoid_pairs for seed in range(400)]
    assert 0.4 < sum(spared) / len(spared) < 0.6
