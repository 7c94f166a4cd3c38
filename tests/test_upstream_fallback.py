"""An ONNX tool's test whose drawn upstream fails to export the graph starts from another upstream (the native model
first), labelled with the upstreams that failed; a pinned upstream is kept. The export failure is planted where the
check shares it, in the source's exports."""

from __future__ import annotations

from pathlib import Path

from fuzzer.campaign.spec import LOG_DIR
from fuzzer.campaign.upstream_fallback import exporting_options
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.check.pipeline import check_prepared, prepare
from fuzzer.check.result import Expected
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import SharedExport, UpstreamError
from fuzzer.converters.native import NATIVE
from fuzzer.converters.upstream import cached_upstream, upstream_exporters
from generators.builder import GraphBuilder
from generators.dtypes import DType
from generators.ir import Graph
from oracles.taxonomy import Failure
from oracles.verdict import Stage

DYNAMO = "torch-onnx-dynamo"


def _graph() -> Graph:
    b = GraphBuilder()
    x = b.input((2, 3), DType.FLOAT32)
    return b.build((b.op("sin", (x,), (2, 3), DType.FLOAT32),))


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


def test_a_test_whose_upstream_fails_to_export_starts_from_the_native_model(tmp_path: Path) -> None:
    graph, tool = _graph(), CONVERTERS["ort-optimizer"]
    prepared = _planted(graph, (DYNAMO, 18))
    drawn = {**tool.options_type.draw(5, {"upstream": DYNAMO, "opset": 18}).to_json()}
    options, failed, timings = exporting_options(_config(tmp_path), tool, 5, graph, drawn, prepared)
    assert options["upstream"] == NATIVE and failed == [DYNAMO]
    assert cached_upstream(prepared.source, NATIVE, options["opset"]) is not None
    assert timings and all(timer.startswith("upstream_") for timer in timings)
    result = check_prepared(prepared, tool, options)
    assert result.verdict.stage is not Stage.SOURCE and result.options["upstream"] == NATIVE


def test_a_pinned_upstream_is_kept_and_an_upstream_that_exports_is_not_replaced(tmp_path: Path) -> None:
    graph, tool = _graph(), CONVERTERS["ort-optimizer"]
    prepared = _planted(graph, (DYNAMO, 18))
    pinned = {"upstream": DYNAMO, "opset": 18}
    options, failed, _ = exporting_options(_config(tmp_path, **pinned), tool, 5, graph, pinned, prepared)
    assert (options, failed) == (pinned, [])
    native = {"upstream": NATIVE, "opset": 17}
    options, failed, timings = exporting_options(_config(tmp_path), tool, 5, graph, native, prepared)
    assert (options, failed) == (native, []) and timings


def test_past_the_native_model_the_first_exporter_left_is_tried_and_none_once_every_one_failed(
        tmp_path: Path) -> None:
    graph, tool, config = _graph(), CONVERTERS["ort-optimizer"], _config(tmp_path)
    exporters = [c.name for c in upstream_exporters()]
    after = config.upstream_after(tool, 5, graph, [DYNAMO, NATIVE])
    assert after is not None and after["upstream"] == next(name for name in exporters if name != DYNAMO)
    assert config.upstream_after(tool, 5, graph, [*exporters, NATIVE]) is None
