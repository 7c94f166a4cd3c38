"""The oracle's word on one target run, from numpy arrays and plain data.

Shapes and dtypes compare exactly; values only count as wrong when blame says the target is measurably farther from
the float64 reference than the float32 source is, and a float64 model that an ONNX operator with no float64 makes
compute in float32 is that operator's precision, not a defect (labelled unsupported). What needs the source model
(settling what torch leaves unspecified, the reference with float32-stored attributes, the target model's
float32-only operators) is asked of the check through `Settling`, and only when a decision needs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from oracles.blame import (
    DENORMALS_FLUSHED,
    EXTREME_INPUT_OVERFLOW,
    INTEGER_OVERFLOW,
    BlameResult,
    blame_output,
    differs_only_where,
    flush_explains,
)
from oracles.compare import FLOAT_DTYPES, OutputComparison, Reason, Tolerance, compare, default_tolerance
from oracles.signature import wrong_value_signature
from oracles.verdict import Stage, Symptom, Verdict, symptom_of

INVALID_INPUTS = "invalid-inputs"  # the input search found no NaN/Inf-free inputs: treat values with care
# The label of a float64 model an ONNX operator without float64 makes compute in float32: shown, not filed.
FLOAT64_THROUGH_FLOAT32 = "float64-through-float32"
NOT_BLAMED = "not-blamed"  # "not-blamed:<reason>": a value difference blame puts on the float32 source
# "computed-in:<dtype>-as-<narrower>": a pass whose outputs of <dtype> are within the tolerance of the narrower dtype
# the target computes them in (TargetSide.computed_in) but not of their own.
COMPUTED_IN = "computed-in"


@dataclass(frozen=True)
class SourceSide:
    """The source's side of a comparison: per graph output its name, dtype and producing operator, the eager
    float32 outputs and the float64 reference, and whether the input search found valid inputs."""

    names: tuple[str, ...]
    dtypes: tuple[str, ...]
    producers: tuple[str | None, ...]  # None: an output no operator makes
    eager: tuple[np.ndarray, ...]
    reference: tuple[np.ndarray, ...]
    valid_inputs: bool = True
    # The graph's own (PyTorch) float64 twin where `reference` is another framework's (TensorFlow's, which flushes
    # subnormals to zero on a CPU); None: `reference` is that twin.
    ieee: tuple[np.ndarray, ...] | None = None


@dataclass(frozen=True)
class TargetSide:
    """The target's outputs and the dtypes it declared; `baseline`: the unconverted model's outputs, for a tool that
    starts from another converter's export (compared against instead of the eager ones)."""

    converter: str
    divergence_stage: Stage
    outputs: tuple[np.ndarray, ...]
    dtypes: tuple[str, ...]
    baseline: tuple[np.ndarray, ...] | None = None
    baseline_dtypes: tuple[str, ...] | None = None
    # The float dtypes it computes in a narrower one, by design or by a setting (dtype: narrower): their outputs are
    # judged at the narrower dtype's tolerance.
    computed_in: Mapping[str, str] = field(default_factory=dict)


def judged_tolerance(dtype: str, computed_in: Mapping[str, str]) -> Tolerance:
    """The tolerance an output of `dtype` is judged at: its own, or the looser one of the dtype it is computed in."""
    own = default_tolerance(dtype)
    narrower = computed_in.get(dtype)
    if narrower is None or dtype not in FLOAT_DTYPES:
        return own
    other = default_tolerance(narrower)
    return Tolerance(max(own.rtol, other.rtol), max(own.atol, other.atol))


class Settling(Protocol):
    """What the check computes from the source model, asked only when a decision needs it."""

    def settled(self, outputs: Sequence[np.ndarray], float64: bool, kept: Sequence[bool] = ()
                ) -> tuple[np.ndarray, ...]:
        """The graph's outputs with what torch leaves unspecified settled (outputs marked in `kept` as they are)."""
        ...

    def rounded_reference(self) -> tuple[np.ndarray, ...] | None:
        """The settled float64 reference with float32-stored attributes rounded so; None when none is rounded."""
        ...

    def float32_only_ops(self) -> tuple[str, ...]:
        """The ONNX operators without float64 that the target model goes through (none without a model)."""
        ...

    def flushed(self) -> tuple[np.ndarray, ...] | None:
        """The source's settled outputs computed with subnormals flushed to zero; None where that cannot run."""
        ...

    def overflowed(self, narrowed: frozenset[str] = frozenset()) -> tuple[np.ndarray | None, ...]:
        """Per output, where its value comes from an integer overflow of the source (None: nowhere); `narrowed`:
        the integer dtypes the target computes in a narrower one, whose values beyond that one count as overflows."""
        ...

    def extreme_inputs(self) -> tuple[np.ndarray | None, ...]:
        """Per output, where an input beyond the square root of its dtype's largest value reaches (None: nowhere)."""
        ...


OUTPUT_COUNT = "target has {} outputs, the graph {}"  # a dropped (or extra) output: oracles/rootcause.py reads it
WHERE_SOURCE = "where the source gives"  # a wrong dtype's message: "<target's> where the source gives <source's>"


def judge_outputs(source: SourceSide, target: TargetSide, settling: Settling) -> Verdict:
    """Shape and dtype exactly; values only when blame says the target is measurably farther from float64."""
    name, dtypes = target.converter, source.dtypes
    if len(target.outputs) != len(dtypes):
        return divergence(source, target, Symptom.WRONG_SHAPE, (), None,
                          OUTPUT_COUNT.format(len(target.outputs), len(dtypes)))
    unsettled = target.baseline if target.baseline is not None else source.eager
    # An output bit for bit the source's (most are) compares equal settled or not: settling it is skipped.
    same = tuple(bit_identical(a, b) for a, b in zip(target.outputs, unsettled, strict=True))
    outputs = settling.settled(target.outputs, False, same)
    baseline = settling.settled(unsettled, False, same)
    if target.baseline is not None and not matches_graph(baseline, target.baseline_dtypes, source.eager, dtypes):
        return Verdict(Symptom.WRONG_SHAPE, Stage.SOURCE, name, message="the unconverted model's outputs do not "
                       "have the graph's shapes and dtypes: the exporter's bug, not this converter's")
    rows = zip(outputs, target.dtypes, baseline, dtypes, strict=True)
    metrics = tuple(compare_declared(a, d, b, t, judged_tolerance(t, target.computed_in)) for a, d, b, t in rows)
    symptom = symptom_of(metrics)
    if symptom is Symptom.PASS:
        narrowed = computed_in_labels(outputs, baseline, dtypes, target.computed_in)
        return labelled(Verdict(Symptom.PASS, Stage.NONE, name, metrics, labels=narrowed), source.valid_inputs)
    failing = [i for i, m in enumerate(metrics) if not m.ok]
    if symptom is not Symptom.WRONG_VALUES:
        # The first output that shows this symptom (an earlier one may only have wrong values).
        index = next(i for i in failing if symptom_of((metrics[i],)) is symptom)
        first = metrics[index]
        detail = (f": {first.actual_dtype} {WHERE_SOURCE} {first.expected_dtype}" if symptom is Symptom.WRONG_DTYPE
                  else "")
        return divergence(source, target, symptom, metrics, index,
                          f"{symptom.json_name} at output {source.names[index]}{detail}")
    return _judge_values(source, dataclasses.replace(target, outputs=outputs), baseline, metrics, failing, settling)


def _judge_values(source: SourceSide, target: TargetSide, baseline: Sequence[np.ndarray],
                  metrics: tuple[OutputComparison, ...], failing: Sequence[int], settling: Settling) -> Verdict:
    """Wrong values blamed on the target, on the float32 source (a pass, labelled why), or on float32 by design."""
    reference = settling.settled(source.reference, True)
    rounded = rounded_for(failing, source.dtypes, settling)
    blames = {i: blame_output(baseline[i], target.outputs[i], reference[i], source.dtypes[i],
                              judged_tolerance(source.dtypes[i], target.computed_in), rounded=rounded[i])
              for i in failing}
    blames = {i: excused(i, b, source, target, baseline, settling) if b.blamed else b for i, b in blames.items()}
    blamed = [i for i in failing if blames[i].blamed]
    name = target.converter
    if not blamed:
        reasons = sorted({f"{NOT_BLAMED}:{b.reason}" for b in blames.values()})
        return labelled(Verdict(Symptom.PASS, Stage.NONE, name, metrics, labels=tuple(reasons)), source.valid_inputs)
    by_design = float32_by_design(target.outputs, reference, blamed, source.dtypes, settling)
    if by_design:
        return labelled(Verdict(Symptom.UNSUPPORTED, target.divergence_stage, name, metrics,
                                message=f"ONNX's {', '.join(by_design)} takes no float64: the model computes it "
                                "in float32, as the operator's definition allows no other way",
                                labels=tuple(f"{FLOAT64_THROUGH_FLOAT32}:{op}" for op in by_design)),
                        source.valid_inputs)
    return divergence(source, target, Symptom.WRONG_VALUES, metrics, blamed[0],
                      blame_message(source.names[blamed[0]], blames[blamed[0]]))


def excused(index: int, blame: BlameResult, source: SourceSide, target: TargetSide, baseline: Sequence[np.ndarray],
            settling: Settling) -> BlameResult:
    """A blamed output's blame, or not blamed with the reason the source's own answer there is unreliable."""
    reason = unreliable_source(index, source, target, baseline, settling)
    return blame if reason is None else dataclasses.replace(blame, blamed=False, reason=reason)


def unreliable_source(index: int, source: SourceSide, target: TargetSide, baseline: Sequence[np.ndarray],
                      settling: Settling) -> str | None:
    """Why the source's answer at output `index` is no measure of the target (oracles.blame's reasons), or None."""
    dtype, actual = source.dtypes[index], target.outputs[index]
    if source.ieee is not None and dtype in FLOAT_DTYPES:
        flushed = settling.flushed()
        eager, ieee = settling.settled(source.eager, False), settling.settled(source.ieee, True)
        if flushed is not None and flush_explains(baseline[index], actual, flushed[index], eager[index], ieee[index],
                                                  dtype):
            return DENORMALS_FLUSHED
    overflowed = settling.overflowed(narrowed_integers(target.computed_in))[index]
    if overflowed is not None and differs_only_where(actual, baseline[index], dtype, overflowed):
        return INTEGER_OVERFLOW
    extreme = settling.extreme_inputs()[index] if dtype in FLOAT_DTYPES else None
    if extreme is not None and differs_only_where(actual, baseline[index], dtype, extreme & ~np.isfinite(actual)):
        return EXTREME_INPUT_OVERFLOW
    return None


def narrowed_integers(computed_in: Mapping[str, str]) -> frozenset[str]:
    """The integer dtypes a target computes in a narrower one (OpenVINO's CPU plugin: int64 as int32)."""
    return frozenset(d for d in computed_in if d not in FLOAT_DTYPES)


def rounded_for(failing: Sequence[int], dtypes: Sequence[str], settling: Settling
                ) -> tuple[np.ndarray | None, ...]:
    """Per output, the reference with float32-stored attributes rounded, for the failing float outputs of a graph
    that has such attributes (None elsewhere)."""
    floats = [i for i in failing if dtypes[i] in FLOAT_DTYPES]
    rounded = settling.rounded_reference() if floats else None
    if rounded is None:
        return (None,) * len(dtypes)
    return tuple(rounded[i] if i in floats else None for i in range(len(dtypes)))


def float32_by_design(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray], blamed: Sequence[int],
                      dtypes: Sequence[str], settling: Settling) -> tuple[str, ...]:
    """The float32-only ONNX operators a float64 model goes through, when its blamed float64 outputs are within
    float32's tolerance of the float64 answer (so float32 arithmetic explains the whole error); else ()."""
    if any(dtypes[i] != "float64" for i in blamed):
        return ()
    through = settling.float32_only_ops()
    if not through:
        return ()
    float32 = default_tolerance("float32")
    within = all(compare(np.asarray(outputs[i]), np.asarray(reference[i]), "float64", float32).ok for i in blamed)
    return through if within else ()


def bit_identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and values (NaN where NaN): settled alike, so equal settled or not."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def computed_in_labels(outputs: Sequence[np.ndarray], baseline: Sequence[np.ndarray], dtypes: Sequence[str],
                       computed_in: Mapping[str, str]) -> tuple[str, ...]:
    """COMPUTED_IN labels of the dtypes whose outputs pass only at the tolerance of the dtype they are computed in."""
    narrowed = {dtypes[i] for i in range(len(dtypes)) if dtypes[i] in computed_in and dtypes[i] in FLOAT_DTYPES
                and not compare(outputs[i], baseline[i], dtypes[i]).ok}
    return tuple(f"{COMPUTED_IN}:{d}-as-{computed_in[d]}" for d in sorted(narrowed))


def compare_declared(actual: np.ndarray, declared: str, expected: np.ndarray, dtype: str,
                     tol: Tolerance | None = None) -> OutputComparison:
    """compare(), plus the dtype the target declared: bfloat16 and float32 share storage, so check the name."""
    result = compare(actual, expected, dtype, tol)
    if declared != dtype and result.reason is not Reason.SHAPE:
        return dataclasses.replace(result, ok=False, reason=Reason.DTYPE, actual_dtype=declared, expected_dtype=dtype)
    if result.reason is Reason.DTYPE:  # the graph's dtype, not the storage it is compared in (bfloat16 in float32)
        return dataclasses.replace(result, expected_dtype=dtype)
    return result


def matches_graph(baseline: Sequence[np.ndarray], declared: Sequence[str] | None, eager: Sequence[np.ndarray],
                  dtypes: Sequence[str]) -> bool:
    """Whether the unconverted model's outputs have the graph's shapes and dtypes; its declared dtypes too, since
    bfloat16 and float32 share numpy storage."""
    if declared is not None and tuple(declared) != tuple(dtypes):
        return False
    return len(baseline) == len(eager) and all(b.shape == e.shape and b.dtype == e.dtype
                                               for b, e in zip(baseline, eager, strict=True))


def divergence(source: SourceSide, target: TargetSide, symptom: Symptom, metrics: tuple[OutputComparison, ...],
               index: int | None, message: str) -> Verdict:
    """A divergence verdict; its signature names the operator and dtype producing the diverging output."""
    stage = target.divergence_stage
    op = source.producers[index] if index is not None else None
    dtype = source.dtypes[index] if index is not None else None
    signature = wrong_value_signature(target.converter, stage, symptom, op, dtype)
    verdict = Verdict(symptom, stage, target.converter, metrics, signature, message, diverging_op=op,
                      diverging_dtype=dtype)
    return labelled(verdict, source.valid_inputs)


def blame_message(output: str, blame: BlameResult) -> str:
    """How far the target and the source are from the float64 reference, in tolerance units."""
    return (f"output {output}: target {blame.target_error:.3g} tolerance units from the float64 reference, "
            f"source {blame.source_error:.3g}")


def labelled(verdict: Verdict, valid_inputs: bool) -> Verdict:
    """The verdict, labelled when the inputs it was judged on are not known to be valid."""
    return verdict if valid_inputs else verdict.with_labels(INVALID_INPUTS)
