"""Support probe: cached per library version, resumable, never silently empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzzer.campaign.probe import OK, UNSUPPORTED, ProbeError, load_probe, probe_pairs, run_probe
from fuzzer.check.pipeline import CheckResult, check_prepared, prepare
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.torch_onnx_script import ScriptOptions, TorchOnnxScript
from generators.dtypes import DType
from generators.generator import single_op_graph
from generators.registry import REGISTRY
from oracles.verdict import Stage, Symptom, Verdict

CONV = "torch-onnx-script"
OPS = ("add", "tanh")
DTYPES = (DType.FLOAT32, DType.BFLOAT16)


class NoBfloat16Kernels(TorchOnnxScript):
    """The TorchScript exporter whose runtime has no bfloat16 kernels: a bfloat16 input is ONNX Runtime's documented
    NOT_IMPLEMENTED at load (planted, so the probe's finding does not hang on what a runtime release adds)."""

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        if any(t.dtype is DType.BFLOAT16 for t in source.graph.inputs.values()):
            from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

            with Steps().at(Stage.RUNTIME_LOAD, "runtime_load"):
                raise OrtNotImplemented("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an "
                                        "implementation for the node (planted)")
        return super().convert_impl(source, options)


class CountingCheck:
    """A check under the planted converter, in the place of CONV, counting calls (a probe served from cache makes
    none)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, graph, seed, converter, options, check_options) -> CheckResult:
        assert converter == CONV
        self.calls += 1
        return check_prepared(prepare(graph, seed, {}, check_options.input_budget_s), NoBfloat16Kernels(), options,
                              check_options)


def _probe(cache: Path, check, **kwargs):
    return run_probe(cache, [CONV], ops=OPS, dtypes=DTYPES, check=check, **kwargs)


def test_probe_finds_bfloat16_kernels_missing_and_caches(tmp_path: Path) -> None:
    first = CountingCheck()
    table = _probe(tmp_path, first)
    assert first.calls == len(probe_pairs(OPS, DTYPES)) == 4
    assert {(e.op, e.dtype): e.status for e in table.of(CONV)}[("add", "float32")] == OK
    assert ("add", "bfloat16") in table.unsupported(CONV)
    assert table.supported_dtypes(CONV, "tanh") == (DType.FLOAT32,)
    assert table.excluded_ops(CONV) == ()

    again = CountingCheck()
    assert _probe(tmp_path, again) == table
    assert again.calls == 0
    assert load_probe(tmp_path, [CONV]) is not None


def test_new_library_version_reprobes(tmp_path: Path) -> None:
    _probe(tmp_path, CountingCheck())
    upgraded = CountingCheck()
    table = _probe(tmp_path, upgraded, versions={CONV: {"torch": "99.0-simulated"}})
    assert upgraded.calls == 4
    assert table.versions[CONV] == {"torch": "99.0-simulated"}
    assert len(list(tmp_path.glob("probe-*.json"))) == 2
    assert load_probe(tmp_path, [CONV], versions={CONV: {"torch": "98.0"}}) is None


def _all_unsupported(graph, seed, converter, options, check_options) -> CheckResult:
    verdict = Verdict(Symptom.UNSUPPORTED, Stage.RUNTIME_LOAD, converter, message="NOT_IMPLEMENTED")
    return CheckResult(verdict, {})


def test_a_probe_that_finds_nothing_raises_every_time(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="no .op, dtype. pair that converts"):
        _probe(tmp_path, _all_unsupported)
    (cache,) = tmp_path.glob("probe-*.json")
    assert {e["status"] for e in json.loads(cache.read_text())["entries"]} == {UNSUPPORTED}
    with pytest.raises(ProbeError):
        _probe(tmp_path, CountingCheck())  # served from the cache: still refuses to be empty


def test_time_limit_saves_progress_and_resumes(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="time limit"):
        _probe(tmp_path, CountingCheck(), time_limit_s=0.0)
    resumed = CountingCheck()
    _probe(tmp_path, resumed)
    assert resumed.calls == 4


def test_single_op_graph_reads_the_requested_dtype() -> None:
    graph = single_op_graph(REGISTRY["cast_float32"], DType.INT8, 0)
    assert graph is not None and len(graph.nodes) == 1
    assert graph.types[graph.nodes[0].inputs[0]].dtype is DType.INT8
