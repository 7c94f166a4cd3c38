"""What a case's converted model does outside the run that judged it: ONNX's checker, ONNX Runtime with optimizations
off, and ONNX's reference evaluator (`onnx.reference`) as a third opinion on what the model means. Together they
tell a model that is wrong (the converter's bug) from a runtime that computes a right model wrongly (its kernel's)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from fuzzer.cases.fault_site import PLUMBING
from fuzzer.check.result import Expected
from fuzzer.converters.conversion import Source, StageError, Steps
from fuzzer.converters.native import working_tolerance
from fuzzer.converters.runtime import run_model, validate
from fuzzer.support.tensors import to_oracle_array
from oracles.compare import compare

LINE_CHARS = 160  # of an error quoted as evidence


class Opinion(enum.Enum):
    """What onnx.reference makes of the model, against PyTorch and against ONNX Runtime."""

    AGREES = "agrees with PyTorch"
    WRONG_LIKE_RUNTIME = "gives the same wrong outputs as ONNX Runtime"
    DIFFERS = "differs from PyTorch and from ONNX Runtime"
    FAILS = "cannot run the model"


@dataclass(frozen=True)
class ModelEvidence:
    """The converted model examined three ways."""

    checker: str  # "" when onnx.checker (full) and strict shape inference accept it, else the first error line
    runtime: str  # "" when ONNX Runtime (optimizations off) runs it, else the first error line
    runtime_agrees: bool  # ONNX Runtime's outputs agree with PyTorch's (False when it did not run)
    reference: Opinion
    reference_note: str  # the evaluator's error line when it cannot run the model
    op_types: tuple[str, ...]  # the model's operator types, in order, plumbing left out

    @property
    def valid(self) -> bool:
        return not self.checker


RunModel = Callable[[bytes, Source], tuple[tuple[np.ndarray, ...], tuple[str, ...]]]


def examine(model: bytes, expected: Expected, run: RunModel | None = None) -> ModelEvidence:
    """The checker, the runtime (`run`: the converter's, ONNX Runtime with optimizations off by default) and
    onnx.reference on `model`, fed the case's inputs, each against PyTorch."""
    proto = onnx.load_from_string(model)
    op_types = tuple(dict.fromkeys(n.op_type for n in proto.graph.node if n.op_type not in PLUMBING))
    checker = first_error(lambda: validate(proto))
    runtime_outputs: Sequence[np.ndarray] | None = None
    try:
        runtime_outputs, _ = (run or _ort)(model, expected.source)
        runtime = ""
    except StageError as exc:
        runtime = first_line(f"{exc.failure.exc_type.rsplit('.', 1)[-1]}: {exc.failure.message}")
    runtime_agrees = runtime_outputs is not None and _agree(runtime_outputs, expected)
    opinion, note = _reference_opinion(proto, expected, runtime_outputs)
    return ModelEvidence(checker, runtime, runtime_agrees, opinion, note, op_types)


def _ort(model: bytes, source: Source) -> tuple[tuple[np.ndarray, ...], tuple[str, ...]]:
    return run_model(model, source, Steps())


def _reference_opinion(proto: onnx.ModelProto, expected: Expected,
                       runtime_outputs: Sequence[np.ndarray] | None) -> tuple[Opinion, str]:
    from onnx.reference import ReferenceEvaluator

    source = expected.source
    feeds = {name: to_oracle_array(x)[0] for name, x in zip(source.input_names, source.inputs, strict=True)}
    wanted = {i.name for i in proto.graph.input}
    try:
        outputs = ReferenceEvaluator(proto).run(None, {n: v for n, v in feeds.items() if n in wanted})
    except Exception as exc:  # the evaluator's own gaps as much as a broken model: evidence, never a verdict
        return Opinion.FAILS, first_line(f"{type(exc).__name__}: {exc}")
    outputs = [np.asarray(x, dtype=np.float32) if np.asarray(x).dtype.name == "bfloat16" else np.asarray(x)
               for x in outputs]
    if _agree(outputs, expected):
        return Opinion.AGREES, ""
    if runtime_outputs is not None and _alike(outputs, runtime_outputs):
        return Opinion.WRONG_LIKE_RUNTIME, ""
    return Opinion.DIFFERS, ""


def _alike(ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> bool:
    """Two runs' outputs alike: the same shapes and dtypes, and values within float32's tolerance (a wrong dtype
    or shape both evaluators produce is the model's)."""
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            if not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-4, atol=1e-6, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return True


def _agree(outputs: Sequence[np.ndarray], expected: Expected, wanted: Sequence[np.ndarray] | None = None) -> bool:
    """Every output within its working tolerance of `wanted` (PyTorch's eager outputs by default)."""
    graph = expected.source.graph
    wanted = expected.eager if wanted is None else wanted
    if len(outputs) != len(graph.outputs) or len(wanted) != len(graph.outputs):
        return False
    for name, got, want in zip(graph.outputs, outputs, wanted, strict=True):
        dtype = graph.types[name].dtype.value
        try:
            if not compare(np.asarray(got), np.asarray(want), dtype, working_tolerance(graph, name)).ok:
                return False
        except (TypeError, ValueError):  # an output of another dtype or layout than the graph's: no agreement
            return False
    return True


def first_error(run: Callable[[], object]) -> str:
    """The first line of what `run` raises (its type named), "" where it raises nothing."""
    try:
        run()
    except Exception as exc:  # what the checker or shape inference raises, whatever its type
        return first_line(f"{type(exc).__name__}: {exc}")
    return ""


def first_line(text: str) -> str:
    """The text's first line, at most LINE_CHARS long."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:LINE_CHARS]
