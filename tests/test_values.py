"""Value strategies: each test draws its inputs uniformly, with special values mixed in, or at large magnitudes,
from its seed; the strategy is recorded in the case and replayed."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.case import case_from_check
from fuzzer.cases.folder import read_case, write_case
from fuzzer.cases.replay import case_expected
from fuzzer.check.pipeline import run_check
from fuzzer.check.result import Expected
from generators.dtypes import DType
from generators.generator import GenOptions, generate
from generators.ir import TensorType
from generators.materialize import input_tensor, random_tensor
from generators.values import ValueStrategy, draw_strategy, extreme_values

FLOATS = TensorType((4000,), DType.FLOAT32)


def draw(ttype: TensorType, values: ValueStrategy, value_range: tuple[float, float] | None = None) -> torch.Tensor:
    return input_tensor(ttype, torch.Generator().manual_seed(7), value_range, values)


def test_uniform_draws_exactly_what_the_campaign_drew_before_strategies() -> None:
    for dtype in DType:
        ttype = TensorType((3, 5), dtype)
        before = random_tensor(ttype, torch.Generator().manual_seed(7), None)
        assert torch.equal(draw(ttype, ValueStrategy.UNIFORM), before)


def test_special_values_mix_signed_zeros_exact_integers_halves_and_extremes_into_a_third() -> None:
    x = draw(FLOATS, ValueStrategy.SPECIAL).double()
    exact = {v: int((x == v).sum()) for v in (1.0, -1.0, 0.5, 2.5)}
    assert all(count > 0 for count in exact.values()), exact
    assert int(((x == 0) & torch.signbit(x)).sum()) > 0  # -0.0
    assert int((x.abs() > 1e37).sum()) > 0  # near float32's overflow
    assert int(((x != 0) & (x.abs() < 1e-37)).sum()) > 0  # near its underflow
    special = (x == x.round()) | (x * 2 == (x * 2).round()) | (x.abs() > 1e37) | (x.abs() < 1e-37)
    assert 0.25 < float(special.double().mean()) < 0.35


def test_special_values_stay_inside_the_range_the_graph_gives_a_tensor() -> None:
    x = draw(FLOATS, ValueStrategy.SPECIAL, (0.1, 2.0)).double()
    assert float(x.min()) >= 0.1 and float(x.max()) <= 2.0
    assert int((x == 1.0).sum()) > 0 and int((x == 1.5).sum()) > 0 and int((x == 0.0).sum()) == 0


def test_int64_specials_include_values_that_do_not_fit_int32() -> None:
    x = draw(TensorType((4000,), DType.INT64), ValueStrategy.SPECIAL)
    assert set(extreme_values(DType.INT64)) <= set(x.tolist())
    assert (x.abs() <= 2**31).all()


def test_large_magnitudes_are_large_unless_the_graph_bounds_the_tensor() -> None:
    x = draw(FLOATS, ValueStrategy.LARGE)
    assert float(x.abs().max()) > 900 and float(x.abs().max()) <= 1000
    assert float(draw(FLOATS, ValueStrategy.LARGE, (-1.0, 1.0)).abs().max()) <= 1.0
    assert float(draw(TensorType((500,), DType.FLOAT16), ValueStrategy.LARGE).abs().max()) <= 256


def test_a_seed_draws_its_strategy_the_same_way_each_time_and_mostly_uniform() -> None:
    counts = collections.Counter(draw_strategy(seed) for seed in range(2000))
    assert [draw_strategy(seed) for seed in range(50)] == [draw_strategy(seed) for seed in range(50)]
    assert 900 < counts[ValueStrategy.UNIFORM] < 1100 and 500 < counts[ValueStrategy.SPECIAL] < 700
    assert {draw_strategy(seed, (ValueStrategy.LARGE,)) for seed in range(20)} == {ValueStrategy.LARGE}
    config = WorkerConfig(out_dir="x", log_dir="x", values=("uniform", "special"))
    assert {config.values_for(seed) for seed in range(40)} == {ValueStrategy.UNIFORM, ValueStrategy.SPECIAL}


def test_a_check_records_its_strategy_and_a_case_replays_its_inputs_from_it(tmp_path: Path) -> None:
    graph = generate(11, GenOptions(nodes=3, include_ops=("add", "mul", "relu"), dtypes=(DType.FLOAT32,)))
    result = run_check(graph, 11, "torch-onnx-script", None, values=ValueStrategy.SPECIAL)
    assert isinstance(result.expected, Expected) and result.expected.values == "special"
    case = case_from_check(graph, 11, "torch-onnx-script", None, values=ValueStrategy.SPECIAL)
    written = read_case(write_case(tmp_path, case))
    assert written.values == "special"
    import dataclasses

    seedless = dataclasses.replace(written, inputs=())  # as a lost worker's case: only the seed and strategy
    again = case_expected(seedless)
    assert isinstance(again, Expected) and again.values == "special"
    assert all(torch.equal(a, b) for a, b in zip(again.source.inputs, result.expected.source.inputs, strict=True))


@pytest.mark.slow
def test_an_unknown_strategy_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fuzzer", "fuzz", "--values", "uniform,odd", "--out",
                           str(tmp_path / "c")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "strategies are large, special, uniform" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "c").exists()
