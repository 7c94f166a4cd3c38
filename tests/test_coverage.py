"""`convsmith ops --coverage`: the ATen operators each exporter translates that no generator operator exercises."""

from __future__ import annotations

import json

import pytest

from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.capabilities import AtenOps
from fuzzer.converters.coverage import coverage, exercised_aten_ops
from generators.registry import REGISTRY


@pytest.mark.slow
def test_every_operator_reaches_some_aten_operator_and_the_gap_is_public_names_only() -> None:
    reached = exercised_aten_ops(REGISTRY)
    assert set(reached) == set(REGISTRY) and all(reached.values())
    assert "aten::bitwise_right_shift" in reached["bitwise_right_shift"]  # `x >> y` is named for what it calls
    rows = {r.converter: r for r in coverage([CONVERTERS["torch-onnx-script"], CONVERTERS["torch-onnx-dynamo"]],
                                             reached)}
    for row in rows.values():
        assert "aten::add" in row.exercised and "aten::add" not in row.missing
        assert "aten::bernoulli" in row.missing  # random sampling: no generator operator draws
        assert not [m for m in row.missing if m.startswith("aten::_") or m.endswith("_")]
    assert not isinstance(CONVERTERS["onnxsim"], AtenOps)  # an ONNX tool has no ATen list


def test_the_command_prints_each_exporter_as_json(capsys) -> None:
    assert main(["ops", "--coverage", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["aten"]
    assert {r["converter"] for r in rows} == {"torch-onnx-script", "torch-onnx-dynamo"}
    for row in rows:
        assert 0 < row["exercised"] < row["supported"] and row["not_exercised"] == sorted(row["not_exercised"])
