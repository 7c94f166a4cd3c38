"""A target that computes float types in a narrower one, by design or by a setting (OpenVINO's CPU plugin computes
float64 in float32 always, and every float type in bfloat16 under a bf16 hint), drifts further from the float64
answer than one rounding of each output: every operation of a chain rounds, and an argument rounded to the narrower
type moves a steep function's value (sin of a large float64). How far is decided by the source itself computed in
the narrower type. A wrong-values divergence whose every failing output, of a dtype the target narrows, is at most
NARROW_SLACK times as far from the float64 answer as the source's own narrowed run is a rounding difference: it
passes, labelled `not-blamed:within-<narrower>-computation`, and is not filed. A farther one stays a bug."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import torch

from fuzzer.check.fold_rounding import fold_errors
from fuzzer.check.result import Expected
from fuzzer.converters.conversion import TargetRun
from generators.dtypes import DType
from oracles.compare import FLOAT_DTYPES
from oracles.judgement import NOT_BLAMED
from oracles.verdict import Stage, Symptom, Verdict

# OpenVINO's plugin keeps accumulations and normalizations in float32 where eager bfloat16 does not: it should not be
# farther off than the eager narrowed run, and twice that allows for a different order of the same roundings.
NARROW_SLACK = 2.0


def computed_narrow(narrower: str) -> str:
    """The label of a divergence passed as the drift of computing in `narrower`."""
    return f"{NOT_BLAMED}:within-{narrower}-computation"


COMPUTED_NARROW = computed_narrow("bfloat16")


def narrowed_outputs(expected: Expected, narrower: str, narrowed: frozenset[str]) -> tuple[np.ndarray, ...] | None:
    """The source module run with its float weights and inputs of the `narrowed` dtypes in `narrower`, outputs in
    float64; None where torch cannot run it so."""
    into, wide = DType(narrower).torch, {DType(d).torch for d in narrowed}
    module = copy.deepcopy(expected.source.module).cpu()
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        if tensor.dtype in wide:
            tensor.data = tensor.data.to(into)
    inputs = tuple(x.cpu().to(into) if x.dtype in wide else x.cpu() for x in expected.source.inputs)
    try:
        with torch.no_grad():
            outputs = module(*inputs)
    except (RuntimeError, TypeError, ValueError, NotImplementedError):  # an operator without a kernel of that type
        return None
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return tuple(o.detach().to(torch.float64).numpy() if o.is_floating_point() else o.numpy() for o in outputs)


def bfloat16_outputs(expected: Expected) -> tuple[np.ndarray, ...] | None:
    """The source run in bfloat16 (every float type narrowed), outputs in float64."""
    return narrowed_outputs(expected, "bfloat16", frozenset({"float64", "float32", "float16"}))


def judged_narrowed(verdict: Verdict, expected: Expected, run: TargetRun) -> Verdict:
    """`verdict` of a wrong-values divergence of a target that computes in a narrower type: passed where every failing
    output is of a narrowed dtype, all narrowed to one type, and within NARROW_SLACK of the source's error run so;
    unchanged otherwise."""
    floats = {d: n for d, n in run.computed_in.items() if d in FLOAT_DTYPES and n in FLOAT_DTYPES}
    if verdict.symptom is not Symptom.WRONG_VALUES or not floats or len(verdict.metrics) != len(run.outputs):
        return verdict
    failing = [i for i, m in enumerate(verdict.metrics) if not m.ok]
    narrowers = {floats.get(run.output_dtypes[i]) for i in failing}
    if not failing or len(narrowers) != 1 or None in narrowers:
        return verdict
    (narrower,) = narrowers
    yardstick = narrowed_outputs(expected, str(narrower), frozenset(d for d, n in floats.items() if n == narrower))
    if yardstick is None or len(yardstick) != len(run.outputs):
        return verdict
    target = fold_errors([run.outputs[i] for i in failing], [expected.reference[i] for i in failing])
    narrow = fold_errors([yardstick[i] for i in failing], [expected.reference[i] for i in failing])
    if all(t <= NARROW_SLACK * n for t, n in zip(target, narrow, strict=True)):
        return Verdict(Symptom.PASS, Stage.NONE, verdict.converter, verdict.metrics,
                       labels=tuple(sorted({*verdict.labels, computed_narrow(str(narrower))})))
    return verdict
