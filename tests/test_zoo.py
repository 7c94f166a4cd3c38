"""The zoo of real architectures: the registry spans the families, entries are seeded and declared, the oracle
judges a zoo model's conversion, `convsmith zoo` lists and checks; and (slow) every entry builds, runs and exports
with its framework's exporters, each outcome exact."""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import onnx
import pytest
import torch

from fuzzer.check.zoo import EXPORTERS, check_zoo, computed_tolerance, judge_zoo, prepare_zoo
from fuzzer.check.zoo_source import ZooSource
from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import TargetRun
from fuzzer.support.quiet import library_output
from generators.zoo import Family, Framework, ZooUnavailable
from generators.zoo.registry import ZOO
from generators.zoo.spec import image
from generators.zoo.torch_entry import TorchEntry
from generators.zoo.torch_small import NormCnn
from oracles.compare import Tolerance
from oracles.verdict import Stage, Symptom

# The architectures the issue names, each by its entry.
NAMED = ("mobilenet-v2", "resnet", "inception-v3", "keras-mobilenet-v2", "keras-resnet50", "keras-inception-v3",
         "vit", "bert", "gpt2", "llama", "t5", "whisper", "lstm", "gru", "qdq-cnn")

# Every (entry, exporter) whose outcome is not a pass, with why. A converter's documented limit is unsupported; the
# rest are findings (docs/zoo.md says more of each).
OUTCOMES: Mapping[tuple[str, str], Symptom] = {
    # The TorchScript exporter has no symbolic function for aten::diff (Whisper's), aten::rms_norm, nor an LSTM
    # with projections: its limits, said as such.
    ("whisper", "torch-onnx-script"): Symptom.UNSUPPORTED,
    ("norm-mlp", "torch-onnx-script"): Symptom.UNSUPPORTED,
    ("bilstm", "torch-onnx-script"): Symptom.UNSUPPORTED,
    # The dynamo exporter writes an LSTM with projections that ONNX's shape inference rejects (Concat of rank 1 and
    # rank 2 inputs).
    ("bilstm", "torch-onnx-dynamo"): Symptom.INVALID_MODEL,
    # The dynamo exporter's decompositions turn the `reshape` of a transposed attention output (T5's and Swin's
    # eager attention) into a `view`, which that tensor's strides do not allow: its crash, where eager PyTorch runs.
    ("t5", "torch-onnx-dynamo"): Symptom.CRASH,
    ("swin", "torch-onnx-dynamo"): Symptom.CRASH,
}


class Planted(TorchEntry):
    """A throwaway entry: the norm-cnn model under another name, needing a library that does not exist."""

    name = "planted"
    family = Family.NORMALIZATION
    summary = "test entry"
    inputs = (image(size=16),)
    outputs = ("features",)
    parameters = 2984
    requires = ("convsmith_no_such_library",)

    def module(self) -> torch.nn.Module:
        return NormCnn()


def test_the_zoo_spans_every_family_with_at_least_25_entries() -> None:
    assert len(ZOO) >= 25
    assert set(ZOO.families) == set(Family)
    assert {e.framework for e in ZOO.values()} == set(Framework)
    assert [name for name in NAMED if name not in ZOO] == []


def test_every_entry_declares_what_it_is() -> None:
    for entry in ZOO.values():
        names = [spec.name for spec in entry.inputs]
        assert entry.summary and entry.outputs and entry.parameters > 0, entry.name
        assert len(set(names)) == len(names) and len(set(entry.outputs)) == len(entry.outputs), entry.name
        assert all(axis < len(spec.shape) for spec in entry.inputs for axis in spec.dynamic), entry.name


def test_a_missing_library_is_one_line_naming_the_extra() -> None:
    assert Planted().available() == (False, "zoo entry planted needs convsmith_no_such_library: install convsmith's "
                                            "zoo extra (`make install`, or pip install -e '.[zoo]')")
    with pytest.raises(ZooUnavailable, match=r"^zoo entry planted needs convsmith_no_such_library: "):
        Planted().build(0)


def test_weights_and_inputs_come_from_the_seed_alone() -> None:
    entry = ZOO["norm-cnn"]
    state = torch.random.get_rng_state()
    first, again, other = entry.build(3), entry.build(3), entry.build(4)
    assert torch.equal(torch.random.get_rng_state(), state)  # torch's global generator is left as it was
    same = first.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(same[0][k], same[1][k]) for k in same[0])
    weight = "model.group.weight"
    assert not torch.equal(first.model.state_dict()[weight], other.model.state_dict()[weight])
    assert np.array_equal(first.inputs[0], again.inputs[0]) and not np.array_equal(first.inputs[0], other.inputs[0])
    assert first.parameter_count() == entry.parameters


def planted_run(prepared: ZooSource, outputs: tuple[np.ndarray, ...]) -> TargetRun:
    return TargetRun(outputs, prepared.dtypes, {})


def test_the_oracle_blames_a_planted_wrong_output_and_excuses_the_sources_own_error() -> None:
    prepared = prepare_zoo(ZOO["norm-cnn"].build(0))
    converter = CONVERTERS["torch-onnx-script"]
    eager = prepared.eager[0]
    wrong = judge_zoo(prepared, converter, planted_run(prepared, (eager + np.float32(0.05),)))
    assert (wrong.symptom, wrong.stage, wrong.labels) == (Symptom.WRONG_VALUES, Stage.NODE_CONVERSION, ("zoo",))
    assert wrong.signature.startswith("wrong_values-torch-onnx-script-node_conversion-norm-cnn-features-float32-")
    assert wrong.message == "output features of zoo model norm-cnn: values, max_abs=0.05"
    # The float64 answer itself, rounded to float32: as close as the source can be, so never the target's fault.
    exact = judge_zoo(prepared, converter, planted_run(prepared, (prepared.reference[0].astype(np.float32),)))
    assert exact.symptom is Symptom.PASS
    shape = judge_zoo(prepared, converter, planted_run(prepared, (eager[:, :4],)))
    assert shape.symptom is Symptom.WRONG_SHAPE


def test_zoo_lists_every_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == list(ZOO)
    assert lines[-1].startswith(f"{len(ZOO)} architectures in {len(Family)} families")
    assert main(["zoo", "--json", "--family", "recurrent"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == [e.name for e in ZOO.select(Family.RECURRENT)]
    assert rows[0]["inputs"][0]["dynamic"] == {"0": "batch", "1": "sequence"}


def test_zoo_check_passes_an_entry_through_both_exporters(capsys: pytest.CaptureFixture[str]) -> None:
    """The one fast test of a real export: a small model through both torch exporters, judged by the oracle."""
    assert main(["zoo", "--check", "gru"]) == 0
    assert capsys.readouterr().out.splitlines() == ["gru: torch-onnx-script: pass", "gru: torch-onnx-dynamo: pass"]
    assert main(["zoo", "--check", "gru", "--json", "--seed", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["entry"], r["converter"], r["symptom"]) for r in rows] == [("gru", "torch-onnx-script", "pass"),
                                                                          ("gru", "torch-onnx-dynamo", "pass")]
    assert all(len(r["metrics"]) == 2 and all(m["ok"] for m in r["metrics"]) for r in rows)


def test_zoo_check_refuses_an_unknown_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo", "--check", "gru,nothing"]) == 2
    assert capsys.readouterr().err == "convsmith zoo: unknown zoo entry: nothing (see `convsmith zoo`)\n"


@pytest.mark.slow
def test_a_dynamic_export_marks_the_declared_axes(capsys: pytest.CaptureFixture[str]) -> None:
    prepared = prepare_zoo(ZOO["bert"].build(0))
    with library_output():
        results = [check_zoo(prepared, CONVERTERS[name], {"dynamic": True}) for name in EXPORTERS[Framework.PYTORCH]]
    assert [r.verdict.symptom for r in results] == [Symptom.PASS, Symptom.PASS]
    for result in results:
        model = onnx.load_from_string(result.model)
        dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
        assert all(isinstance(d, str) and d for name in ("input_ids", "attention_mask") for d in dims[name]), dims
    assert main(["zoo", "--check", "gru", "--dynamic"]) == 0
    assert capsys.readouterr().out.splitlines() == ["gru: torch-onnx-script: pass", "gru: torch-onnx-dynamo: pass"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ZOO))
def test_every_entry_builds_runs_and_exports(name: str) -> None:
    entry = ZOO[name]
    ok, reason = entry.available()
    if not ok:
        pytest.skip(reason)
    with library_output():
        model = entry.build(0)
        prepared = prepare_zoo(model)
        results = [check_zoo(prepared, CONVERTERS[converter]) for converter in EXPORTERS[entry.framework]]
    assert model.parameter_count() == entry.parameters
    assert len(prepared.eager) == len(entry.outputs)
    outcomes = [(r.converter, r.verdict.symptom, r.verdict.message[:200]) for r in results]
    assert outcomes == [(c, OUTCOMES.get((name, c), Symptom.PASS), outcomes[i][2])
                        for i, c in enumerate(EXPORTERS[entry.framework])]


def test_a_zoo_output_computed_in_a_narrower_dtype_is_judged_at_the_entrys_tolerance_in_that_precision() -> None:
    """OpenVINO under a bf16 hint computes float32 in bfloat16: the entry's float32 tolerance widens by bfloat16's
    ratio to float32's; an output computed in its own dtype keeps the entry's tolerance."""
    deep = Tolerance(rtol=1e-3, atol=1e-4)
    widened = computed_tolerance(deep, "float32", {"float32": "bfloat16"})
    assert (widened.rtol, widened.atol) == pytest.approx((0.16, 0.016))
    assert computed_tolerance(deep, "float32", {"float64": "float32"}) == deep
    assert computed_tolerance(deep, "int64", {"float32": "bfloat16"}) == deep
