"""A target that computes float types in bfloat16 by a setting (OpenVINO's CPU plugin under a bf16 hint) drifts
further from the float64 answer than one rounding of each output, as every operation of a chain rounds: how far is
decided by the source itself computed in bfloat16. A wrong-values divergence whose every failing output, of a dtype
the target narrows, is at most NARROW_SLACK times as far from the float64 answer as the source's own bfloat16 run is
a rounding difference: it passes, labelled COMPUTED_NARROW, and is not filed. A farther one stays a bug."""

from __future__ import annotations

import copy

import numpy as np
import torch

from fuzzer.check.fold_rounding import fold_errors
from fuzzer.check.result import Expected
from fuzzer.converters.conversion import TargetRun
from oracles.judgement import NOT_BLAMED
from oracles.verdict import Stage, Symptom, Verdict

# OpenVINO's plugin keeps accumulations and normalizations in float32 where eager bfloat16 does not: it should not be
# farther off than eager bfloat16, and twice that allows for a different order of the same roundings.
NARROW_SLACK = 2.0
COMPUTED_NARROW = f"{NOT_BLAMED}:within-bfloat16-computation"


def bfloat16_outputs(expected: Expected) -> tuple[np.ndarray, ...] | None:
    """The source module run with its float weights and inputs in bfloat16, outputs back in float64; None where
    torch cannot run it so."""
    module = copy.deepcopy(expected.source.module).cpu().to(torch.bfloat16)
    inputs = tuple(x.cpu().to(torch.bfloat16) if x.is_floating_point() else x.cpu() for x in expected.source.inputs)
    try:
        with torch.no_grad():
            outputs = module(*inputs)
    except (RuntimeError, TypeError, ValueError, NotImplementedError):  # an operator without a bfloat16 kernel
        return None
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return tuple(o.detach().to(torch.float64).numpy() if o.is_floating_point() else o.numpy() for o in outputs)


def judged_narrowed(verdict: Verdict, expected: Expected, run: TargetRun) -> Verdict:
    """`verdict` of a wrong-values divergence of a target that computes in bfloat16: passed where every failing output
    is of a narrowed dtype and within NARROW_SLACK of the source's bfloat16 error; unchanged otherwise."""
    narrowed = {d for d, n in run.computed_in.items() if n == "bfloat16"}
    if verdict.symptom is not Symptom.WRONG_VALUES or not narrowed or len(verdict.metrics) != len(run.outputs):
        return verdict
    failing = [i for i, m in enumerate(verdict.metrics) if not m.ok]
    if not failing or any(run.output_dtypes[i] not in narrowed for i in failing):
        return verdict
    yardstick = bfloat16_outputs(expected)
    if yardstick is None or len(yardstick) != len(run.outputs):
        return verdict
    target = fold_errors([run.outputs[i] for i in failing], [expected.reference[i] for i in failing])
    narrow = fold_errors([yardstick[i] for i in failing], [expected.reference[i] for i in failing])
    if all(t <= NARROW_SLACK * n for t, n in zip(target, narrow, strict=True)):
        return Verdict(Symptom.PASS, Stage.NONE, verdict.converter, verdict.metrics,
                       labels=tuple(sorted({*verdict.labels, COMPUTED_NARROW})))
    return verdict
