"""The oracle's numpy-only decisions (oracles/judgement.py), Symptom's groups and the names of oracles/naming.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oracles.dynamic import DYNAMIC_SHAPE, SECOND_SHAPE, TRACED_ONLY, at_traced_shape, with_second_shape
from oracles.judgement import (
    COMPUTED_IN,
    FLOAT64_THROUGH_FLOAT32,
    INVALID_INPUTS,
    NOT_BLAMED,
    SourceSide,
    TargetSide,
    judge_outputs,
)
from oracles.naming import slug, squash_operator
from oracles.verdict import Stage, Symptom, Verdict


class Plain:
    """A Settling with nothing to settle; counts what the oracle asked for."""

    def __init__(self, through: tuple[str, ...] = ()) -> None:
        self.through, self.asked = through, []

    def settled(self, outputs: Sequence[np.ndarray], float64: bool, kept: Sequence[bool] = ()
                ) -> tuple[np.ndarray, ...]:
        self.asked.append("settled64" if float64 else "settled")
        return tuple(outputs)

    def rounded_reference(self) -> tuple[np.ndarray, ...] | None:
        self.asked.append("rounded")
        return None

    def float32_only_ops(self) -> tuple[str, ...]:
        self.asked.append("float32_only_ops")
        return self.through

    def flushed(self) -> tuple[np.ndarray, ...] | None:
        self.asked.append("flushed")
        return None

    def overflowed(self, narrowed: frozenset[str] = frozenset()) -> tuple[np.ndarray | None, ...]:
        self.asked.append("overflowed")
        return (None,)

    def extreme_inputs(self) -> tuple[np.ndarray | None, ...]:
        self.asked.append("extreme_inputs")
        return (None,)


def _source(eager: np.ndarray, reference: np.ndarray, dtype: str = "float32", valid: bool = True) -> SourceSide:
    return SourceSide(("y",), (dtype,), ("sin",), (eager,), (reference,), valid)


def _target(output: np.ndarray, dtype: str = "float32") -> TargetSide:
    return TargetSide("conv", Stage.NODE_CONVERSION, (output,), (dtype,))


def test_equal_outputs_pass_without_asking_for_the_reference() -> None:
    x = np.linspace(0, 1, 8, dtype=np.float32)
    settling = Plain()
    verdict = judge_outputs(_source(x, x.astype(np.float64)), _target(x.copy()), settling)
    assert verdict.symptom is Symptom.PASS and verdict.stage is Stage.NONE
    assert "settled64" not in settling.asked and "rounded" not in settling.asked


def test_a_far_target_is_blamed_and_signed_by_its_operator_and_dtype() -> None:
    x = np.linspace(0, 1, 8, dtype=np.float32)
    verdict = judge_outputs(_source(x, x.astype(np.float64)), _target(x + 1), Plain())
    assert (verdict.symptom, verdict.stage) == (Symptom.WRONG_VALUES, Stage.NODE_CONVERSION)
    assert (verdict.diverging_op, verdict.diverging_dtype) == ("sin", "float32")
    assert verdict.signature.startswith("wrong_values-conv-node_conversion-sin-float32-")


def test_an_error_the_source_shares_is_not_blamed() -> None:
    reference = np.linspace(0, 1, 8)
    eager = (reference + 1e-3).astype(np.float32)
    verdict = judge_outputs(_source(eager, reference), _target(eager + np.float32(1e-3)), Plain())
    assert verdict.symptom is Symptom.PASS
    assert verdict.labels and all(label.startswith(f"{NOT_BLAMED}:") for label in verdict.labels)


def test_shape_dtype_and_count_come_before_values() -> None:
    x = np.zeros(4, dtype=np.float32)
    assert judge_outputs(_source(x, x.astype(np.float64)), _target(np.zeros(5, np.float32)),
                         Plain()).symptom is Symptom.WRONG_SHAPE
    assert judge_outputs(_source(x, x.astype(np.float64)), _target(x, "bfloat16"),
                         Plain()).symptom is Symptom.WRONG_DTYPE
    none = TargetSide("conv", Stage.NODE_CONVERSION, (), ())
    counted = judge_outputs(_source(x, x.astype(np.float64)), none, Plain())
    assert counted.symptom is Symptom.WRONG_SHAPE and counted.diverging_op is None


def test_float64_through_a_float32_only_operator_is_unsupported() -> None:
    reference = np.linspace(0.1, 1, 8)
    output = reference.astype(np.float32).astype(np.float64)
    source = _source(reference, reference, "float64")
    verdict = judge_outputs(source, _target(output, "float64"), Plain(("Erf",)))
    assert verdict.symptom is Symptom.UNSUPPORTED and verdict.labels == (f"{FLOAT64_THROUGH_FLOAT32}:Erf",)
    assert judge_outputs(source, _target(output, "float64"), Plain()).symptom is Symptom.WRONG_VALUES


def test_invalid_inputs_label_every_verdict() -> None:
    x = np.zeros(4, dtype=np.float32)
    verdict = judge_outputs(_source(x, x.astype(np.float64), valid=False), _target(x), Plain())
    assert verdict.labels == (INVALID_INPUTS,)


def test_a_dynamic_exports_verdict_from_its_runs() -> None:
    passed = Verdict(Symptom.PASS, Stage.NONE, "conv")
    bug = Verdict(Symptom.CRASH, Stage.CAPTURE, "conv", signature="crash-x")
    assert with_second_shape(passed, None).labels == (TRACED_ONLY,)
    assert with_second_shape(passed, passed) == passed
    second = with_second_shape(passed, bug)
    assert set(second.labels) == {DYNAMIC_SHAPE, SECOND_SHAPE} and second.signature == "dynamic-shape-crash-x"
    assert at_traced_shape(bug, bug) == bug
    assert at_traced_shape(bug, passed).labels == (DYNAMIC_SHAPE,)


def test_symptom_groups() -> None:
    assert Symptom.divergences() == (Symptom.WRONG_SHAPE, Symptom.WRONG_DTYPE, Symptom.WRONG_VALUES)
    assert all(s.is_divergence for s in Symptom.divergences()) and not Symptom.CRASH.is_divergence
    assert Symptom.json_names(Symptom.lost_worker()) == ("process_death", "hang", "out_of_memory")
    assert set(Symptom.crash_like()) == {Symptom.CRASH, Symptom.INVALID_MODEL, *Symptom.lost_worker()}


def test_names() -> None:
    assert slug("a b/c") == "a-b-c" and slug("a b/c", "_") == "a_b_c" and slug("///") == "none"
    assert squash_operator("max_pool2d") == squash_operator("MaxPool") == "maxpool"


def test_a_wrong_dtype_is_named_by_the_output_that_has_it_not_an_earlier_wrong_value() -> None:
    x = np.zeros(4, dtype=np.float32)
    source = SourceSide(("y", "z"), ("float32", "float32"), ("sin", "abs"), (x, x), (x.astype(np.float64),) * 2)
    target = TargetSide("conv", Stage.NODE_CONVERSION, (x + 1, x.astype(np.float64)), ("float32", "float64"))
    verdict = judge_outputs(source, target, Plain())
    assert verdict.symptom is Symptom.WRONG_DTYPE and verdict.diverging_op == "abs"
    assert verdict.message == "wrong_dtype at output z: float64 where the source gives float32"


def test_an_output_computed_in_a_narrower_dtype_is_judged_at_its_tolerance() -> None:
    """A target that computes float64 in float32 by design (OpenVINO's CPU plugin) passes, labelled, where its error is
    float32's; one farther off than float32's tolerance is still blamed; float32 computed in bfloat16 alike."""
    reference = np.linspace(0.5, 2.0, 8)
    narrowed = reference.astype(np.float32).astype(np.float64) * (1 + 3e-7)
    as_float32 = TargetSide("ov", Stage.GRAPH_OPTIMIZATION, (narrowed,), ("float64",),
                            computed_in={"float64": "float32"})
    verdict = judge_outputs(_source(reference, reference, "float64"), as_float32, Plain())
    assert verdict.symptom is Symptom.PASS and verdict.labels == (f"{COMPUTED_IN}:float64-as-float32",)
    assert judge_outputs(_source(reference, reference, "float64"), _target(narrowed, "float64"),
                         Plain()).symptom is Symptom.WRONG_VALUES
    far = TargetSide("ov", Stage.GRAPH_OPTIMIZATION, (reference * 1.01,), ("float64",),
                     computed_in={"float64": "float32"})
    assert judge_outputs(_source(reference, reference, "float64"), far, Plain()).symptom is Symptom.WRONG_VALUES
    x = np.linspace(0.5, 2.0, 8, dtype=np.float32)
    bf16 = TargetSide("ov", Stage.GRAPH_OPTIMIZATION, (x * np.float32(1.004),), ("float32",),
                      computed_in={"float32": "bfloat16"})
    assert judge_outputs(_source(x, x.astype(np.float64)), bf16, Plain()).symptom is Symptom.PASS
