"""An ONNX tool's test whose drawn upstream fails to export the graph starts from another upstream (the native model
first), labelled with the upstreams that failed; a pinned upstream is kept. The export failure is planted where the
check shares it, in the source's exports."""

from __future__ import annotations

from pathlib import Path

from fuzzer.campaign.policy.novelty import SETTING
from fuzzer.campaign.policy.settings import settled_options
from fuzzer.campaign.policy.upstream_fallback import chosen_options
from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.pipeline import check_prepared, prepare
from fuzzer.check.result import Expected
from fuzzer.converters import CONVERTERS
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import SharedExport, UpstreamError
from fuzzer.converters.native import NATIVE
from fuzzer.converters.upstream import cached_upstream, upstream_exporters
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from oracles.taxonomy import Failure
from oracles.verdict import Stage

DYNAMO = "torch-onnx-dynamo"
SCRIPT = "torch-onnx-script"


def _graph(dtype: DType = DType.FLOAT32) -> Graph:
    b = GraphBuilder()
    x = b.input((2, 3), dtype)
    return b.build((b.op("sin", (x,), (2, 3), dtype),))


def _planted(graph: Graph, *failing: tuple[str, int]) -> Expected:
    prepared = prepare(graph, 1, {}, 0.2)
    assert isinstance(prepared, Expected)
    for upstream, opset in failing:
        failure = Failure(Stage.NODE_CONVERSION, "RuntimeError", "planted export failure", "")
        prepared.source.exports[(upstream, opset)] = SharedExport(error=UpstreamError(failure, upstream))
    return prepared


def _config(tmp_path: Path, **pinned: object) -> WorkerConfig:
    return WorkerConfig(out_dir=str(tmp_path), log_dir=str(tmp_path / LOG_DIR), vary_settings=True,
                        converter_options={"ort-optimizer": pinned} if pinned else {})


def _seed_drawing(config: WorkerConfig, tool: Converter, graph: Graph, upstream: str) -> int:
    return next(seed for seed in range(100) if config.options_for(tool, seed, graph)["upstream"] == upstream)


def test_a_test_whose_upstream_fails_to_export_starts_from_the_native_model(tmp_path: Path) -> None:
    graph, tool, config = _graph(), CONVERTERS["ort-optimizer"], _config(tmp_path)
    seed = _seed_drawing(config, tool, graph, DYNAMO)
    drawn = config.options_for(tool, seed, graph)
    prepared = _planted(graph, (DYNAMO, drawn["opset"]))
    options, cause, left, timings = chosen_options(config, tool, seed, graph, prepared, [])
    assert options["upstream"] == NATIVE and cause is None and left == [DYNAMO]
    assert cached_upstream(prepared.source, NATIVE, options["opset"]) is not None
    assert timings and all(timer.startswith("upstream_") for timer in timings)
    result = check_prepared(prepared, tool, options)
    assert result.verdict.stage is not Stage.SOURCE and result.options["upstream"] == NATIVE


def test_a_test_whose_upstream_a_demoted_setting_skips_starts_from_another(tmp_path: Path) -> None:
    """A demoted setting the TorchScript exporter cannot avoid (planted: float64 allowed from opset 22, past its
    newest): a tool's test that drew it starts from the native model instead of being skipped as a known cause."""
    graph, tool, config = _graph(DType.FLOAT64), CONVERTERS["ort-optimizer"], _config(tmp_path)
    seed = _seed_drawing(config, tool, graph, SCRIPT)
    demoted = [(SETTING, f"{SCRIPT}|float64|22", 1.0)]
    assert settled_options(tool, config.options_for(tool, seed, graph), graph, seed, demoted)[1] is not None
    options, cause, left, _ = chosen_options(config, tool, seed, graph, _planted(graph), demoted)
    assert cause is None and left == [SCRIPT] and options["upstream"] == NATIVE


def test_a_pinned_upstream_is_kept_and_an_upstream_that_exports_is_not_replaced(tmp_path: Path) -> None:
    graph, tool = _graph(), CONVERTERS["ort-optimizer"]
    prepared = _planted(graph, (DYNAMO, 18))
    pinned = {"upstream": DYNAMO, "opset": 18}
    options, cause, left, _ = chosen_options(_config(tmp_path, **pinned), tool, 5, graph, prepared, [])
    assert (options["upstream"], options["opset"], cause, left) == (DYNAMO, 18, None, [])
    config = _config(tmp_path)
    seed = _seed_drawing(config, tool, graph, NATIVE)
    options, cause, left, timings = chosen_options(config, tool, seed, graph, prepared, [])
    assert options == config.options_for(tool, seed, graph) and (cause, left) == (None, []) and timings


def test_past_the_native_model_the_first_exporter_left_is_tried_and_none_once_every_one_failed(
        tmp_path: Path) -> None:
    graph, tool, config = _graph(), CONVERTERS["ort-optimizer"], _config(tmp_path)
    exporters = [c.name for c in upstream_exporters()]
    after = config.upstream_after(tool, 5, graph, [DYNAMO, NATIVE])
    assert after is not None and after["upstream"] == next(name for name in exporters if name != DYNAMO)
    assert config.upstream_after(tool, 5, graph, [*exporters, NATIVE]) is None
