"""A bug case in memory: one frozen CaseData (graph, seed, converter and options, verdict, tensors, versions),
made from a check result; its log; its id. The folder on disk is fuzzer/cases/folder.py."""

from __future__ import annotations

import dataclasses
import datetime
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzzer.cases.diagnosis import Blame, CrossCheck, Repair
from fuzzer.cases.remedy import Bisection, Workaround
from fuzzer.check.dynamic import planned
from fuzzer.check.pipeline import CheckOptions, CheckResult, run_check
from fuzzer.check.result import FULL_CHECK, Expected
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from fuzzer.converters.conversion import StageError, Steps
from fuzzer.converters.library import distribution_version
from fuzzer.converters.native import NATIVE, native_model
from fuzzer.converters.upstream import cached_upstream
from fuzzer.support.tensors import to_case_array
from generators.ir import Graph
from generators.values import ValueStrategy
from oracles.verdict import Verdict

SCHEMA_VERSION = 1
EXPECTATIONS = (None, "bug", "pass")
BASE_LIBRARIES = ("torch", "onnx", "onnxruntime", "numpy")
FRAME_LINE = "frame: "  # the line of log.txt that names the failing innermost frame


@dataclass(frozen=True, eq=False)
class CaseData:
    """Everything a bug case holds. Tensors are numpy arrays (bfloat16 as ml_dtypes.bfloat16)."""

    id: str
    signature: str
    graph: Graph
    seed: int
    converter: str
    converter_options: Mapping[str, Any]
    verdict: Verdict
    versions: Mapping[str, str]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    created: str
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    inputs: tuple[np.ndarray, ...] = ()  # graph.inputs order
    expected: tuple[np.ndarray, ...] = ()  # float32 eager source outputs, graph.outputs order
    reference: tuple[np.ndarray, ...] = ()  # float64 reference outputs
    model: bytes | None = None  # the target ONNX model
    upstream_model: bytes | None = None  # the model an ONNX-to-ONNX converter received (its repro starts there)
    log: str = ""
    original: str | None = None
    reduction: Mapping[str, Any] | None = None
    expectation: str | None = None
    device: str = "cpu"  # where the source model and ONNX Runtime ran (cpu, cuda)
    cross_checks: tuple[CrossCheck, ...] | None = None  # None until diagnosed (fuzzer/diagnosis/whose_bug.py)
    suggested_fix: Repair | None = None  # None when not diagnosed or no edit made the outputs agree
    blame: Blame | None = None  # whose bug it is, from the diagnosis's evidence (fuzzer/diagnosis/blame.py)
    workaround: Workaround | None = None  # None until searched (fuzzer/cases/remedy.py)
    bisection: Bisection | None = None  # None until `convsmith bisect` ran on it
    values: str = "uniform"  # the value strategy the inputs were drawn with (generators/values.py)
    # A dynamic export's marked dims (fuzzer/converters/dynamic.py, as JSON); None for a static export.
    dynamic: Mapping[str, Any] | None = None
    # The inputs, eager and float64 outputs at the dynamic export's second shape (test_data_set_1); empty when the
    # export is static or the graph has no second shape.
    second_inputs: tuple[np.ndarray, ...] = ()
    second_expected: tuple[np.ndarray, ...] = ()
    second_reference: tuple[np.ndarray, ...] = ()

    def to_json(self, files: Mapping[str, str] | None = None) -> dict[str, Any]:
        """case.json's content; `files` maps each data file to its sha256."""
        data = {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "signature": self.signature,
            "graph": self.graph.to_json(),
            "seed": self.seed,
            "converter": self.converter,
            "converter_options": dict(self.converter_options),
            "verdict": self.verdict.to_json(),
            "versions": dict(self.versions),
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
            "created": self.created,
            "device": self.device,
            "values": self.values,
            "dynamic": None if self.dynamic is None else dict(self.dynamic),
            "original": self.original,
            "reduction": None if self.reduction is None else dict(self.reduction),
            "expectation": self.expectation,
            "cross_checks": None if self.cross_checks is None else [c.to_json() for c in self.cross_checks],
            "suggested_fix": None if self.suggested_fix is None else self.suggested_fix.to_json(),
            "blame": None if self.blame is None else self.blame.to_json(),
            "workaround": None if self.workaround is None else self.workaround.to_json(),
            "bisection": None if self.bisection is None else self.bisection.to_json(),
        }
        if files is not None:
            data["files"] = dict(sorted(files.items()))
        return data


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def collect_versions(distributions: Sequence[str] = ()) -> dict[str, str]:
    """Versions of Python, the OS, the base libraries and the given distributions (a converter's)."""
    libraries = {name: distribution_version(name) for name in dict.fromkeys((*BASE_LIBRARIES, *distributions))}
    return {"python": platform.python_version(), "os": platform.platform(terse=True), **libraries}


def case_id(signature: str, suffix: str = "") -> str:
    """A folder name from a signature (already filename-safe), capped well below filesystem limits."""
    text = re.sub(r"[^A-Za-z0-9_.\-]+", "-", signature).strip("-.") or "case"
    return (text[:150] + (f"-{suffix}" if suffix else ""))


def case_from_result(result: CheckResult, graph: Graph, seed: int, converter: str, versions: Mapping[str, str],
                     log: str = "", case_id_: str | None = None, original: str | None = None,
                     device: str = "cpu", values: str = "uniform") -> CaseData:
    """A CaseData from a check result; `device` and `values` are recorded when the result has no source (a failed
    source runs nowhere else)."""
    verdict: Verdict = result.verdict
    expected, target = result.expected, result.target
    model = target.model if target is not None else result.failed_model
    upstream = _upstream_model(result)
    signature = verdict.signature
    tensors = _source_fields(expected, graph) if expected is not None else {"device": device, "values": values}
    return CaseData(
        id=case_id_ or case_id(signature), signature=signature, graph=graph, seed=seed, converter=converter,
        converter_options=dict(result.options), verdict=verdict, versions=dict(versions),
        input_names=tuple(graph.inputs), output_names=tuple(graph.outputs), created=now_iso(),
        model=model, upstream_model=upstream, log=log, original=original, **tensors,
    )


def _source_fields(expected: Expected, graph: Graph) -> dict[str, Any]:
    """The CaseData fields a settled source gives: weights, inputs, eager and float64 outputs, device, value
    strategy and a dynamic export's marked dims and second shape."""
    source = expected.source
    dtypes = source.output_dtypes
    return {
        "weights": {w: to_case_array(getattr(source.module, w)) for w in graph.weights},
        "inputs": tuple(to_case_array(x) for x in source.inputs),
        "expected": tuple(to_case_array(x, d) for x, d in zip(expected.eager, dtypes, strict=True)),
        "reference": tuple(np.asarray(x) for x in expected.reference),
        "device": source.device, "values": expected.values,
        "dynamic": source.dynamic.to_json() if source.dynamic else None,
        **_second_shape_data(expected),
    }


def _second_shape_data(expected: Expected | None) -> dict[str, tuple[np.ndarray, ...]]:
    """A dynamic export's inputs, eager and float64 outputs at its second shape, as CaseData fields."""
    second = expected.second if expected is not None else None
    if second is None:
        return {}
    dtypes = second.source.output_dtypes
    return {"second_inputs": tuple(to_case_array(x) for x in second.source.inputs),
            "second_expected": tuple(to_case_array(x, d) for x, d in zip(second.eager, dtypes, strict=True)),
            "second_reference": tuple(np.asarray(x) for x in second.reference)}


def lost_case(graph: Graph, seed: int, converter: str, options: Mapping[str, Any], verdict: Verdict,
              versions: Mapping[str, str], dump: str, case_id_: str | None = None, original: str | None = None,
              device: str = "cpu", values: str = "uniform", source: Expected | None = None) -> CaseData:
    """The case of a conversion whose process died or hung: graph, verdict and the faulthandler dump as its log.
    No tensors survive the process: `source` is its source made again (remade_source), whose inputs, weights and
    outputs the case keeps so that its repro.py runs alone; without it, `values` says how its seed draws them."""
    tensors = _source_fields(source, graph) if source is not None else {}
    upstream = _native_upstream(source, options) if source is not None else None
    return CaseData(id=case_id_ or case_id(verdict.signature), signature=verdict.signature, graph=graph, seed=seed,
                    converter=converter, converter_options=dict(options), verdict=verdict, versions=dict(versions),
                    input_names=tuple(graph.inputs), output_names=tuple(graph.outputs), created=now_iso(),
                    log=f"{verdict.message}\n\nfaulthandler:\n{dump}\n", original=original, upstream_model=upstream,
                    **{"device": device, "values": values, **tensors})


def remade_source(graph: Graph, seed: int, options: Mapping[str, Any], device: str = "cpu",
                  values: str = "uniform", input_budget_s: float = FULL_CHECK.input_budget_s) -> Expected | None:
    """The source a test of `graph` from `seed` ran on, made again in this process (the source side is seeded, and
    runs no converter): a worker that died took its tensors along. None when the source itself fails."""
    prepared = prepare(graph, seed, {}, input_budget_s, device, ValueStrategy(values))
    if not isinstance(prepared, Expected):
        return None
    return planned(prepared, {}) if options.get("dynamic") else prepared


def _native_upstream(source: Expected, options: Mapping[str, Any]) -> bytes | None:
    """The native model an ONNX tool received, written again (no exporter runs): what its repro.py starts from."""
    if options.get("upstream") != NATIVE or "opset" not in options:
        return None
    try:
        return native_model(source.source, options["opset"], Steps()).SerializeToString()
    except StageError:
        return None


def logged_frame(log: str) -> str:
    """The failing innermost frame case_log wrote into a case's log ("" where it wrote none)."""
    return next((line.removeprefix(FRAME_LINE) for line in log.splitlines() if line.startswith(FRAME_LINE)), "")


def case_log(result: Any) -> str:
    """log.txt of a case: the verdict and message, the library's traceback (if it failed), per-stage timings."""
    verdict = result.verdict
    lines = [f"verdict: {verdict.symptom.json_name} at {verdict.stage.value}", f"message: {verdict.message}"]
    if result.failure is not None:
        lines += [f"{FRAME_LINE}{result.failure.frame}", "", result.failure.traceback.rstrip()]
    lines += ["", "timings (s):"] + [f"  {k}: {v:.4f}" for k, v in sorted(result.timings.items())]
    return "\n".join(lines) + "\n"


def case_from_check(graph: Graph, seed: int, converter: str, options: Any, original: str | None = None,
                    reduction: dict[str, Any] | None = None, case_id_: str | None = None,
                    check_options: CheckOptions = FULL_CHECK, device: str = "cpu",
                    values: ValueStrategy = ValueStrategy.UNIFORM) -> CaseData:
    """Run the full check on `graph` (on `device`, inputs drawn by `values`) and package the result as a
    CaseData."""
    result = run_check(graph, seed, converter, options, check_options, device, values)
    versions = collect_versions(CONVERTERS[converter].distributions)
    case = case_from_result(result, graph, seed, converter, versions, log=case_log(result), case_id_=case_id_,
                            original=original, device=device)
    return dataclasses.replace(case, reduction=reduction)


def _upstream_model(result: CheckResult) -> bytes | None:
    """The exported model an ONNX-to-ONNX converter started from, whether it then ran or failed."""
    if result.target is not None and result.target.baseline_model is not None:
        return result.target.baseline_model
    if result.expected is None or "upstream" not in result.options:
        return None
    return cached_upstream(result.expected.source, result.options["upstream"], result.options["opset"],
                           runnable=False)
