"""A campaign unit drawn from the zoo (`convsmith fuzz --source zoo`): the seed picks an architecture and draws its
weights and inputs, and the model goes through every converter that can take it, judged by the same oracle.

An exporter of the entry's framework takes it as it is; an ONNX tool starts from a torch exporter's model of it (the
upstream drawn by the seed); a converter that cannot take it (another framework's, or an ONNX tool beside a Keras
model) is skipped as inexpressible. A bug's evidence goes to `zoo/<case>/` in the campaign folder: `zoo.json` (the
entry, seed, converter, options and verdict, and the command that checks it again), the model the converter wrote,
and the inputs and expected outputs in the ONNX test-case layout. An ONNX tool's finding is the test's case folder:
the campaign's reducer cuts it down to its smallest failing subgraph, a case inside it (fuzzer/modelcheck/
zoo_finding.py); an exporter's is not reduced.
"""

from __future__ import annotations

import dataclasses
import json
import random
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from fuzzer.campaign.messages import Step, UnitFailed, UnitPrepared
from fuzzer.campaign.result import TestResult
from fuzzer.campaign.sources import SourceKind
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.case import case_id
from fuzzer.cases.diagnosis import Blame
from fuzzer.cases.zoo_report import check_command, zoo_report
from fuzzer.check.zoo import EVIDENCE_DIR, EVIDENCE_RECORD, ZooResult, check_zoo, prepare_zoo
from fuzzer.check.zoo_source import ZooSource
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.base import Converter
from fuzzer.converters.describe import FaultSite
from fuzzer.converters.upstream import starts_upstream, upstream_default_opset
from fuzzer.diagnosis.zoo_blame import zoo_blame
from fuzzer.support.files import atomic_publish_dir
from fuzzer.support.tensors import to_proto_bytes
from generators.zoo import Framework, ZooEntry
from generators.zoo.registry import ZOO

ZOO_SOURCE = SourceKind.ZOO.value  # a zoo unit's value strategy in the database: `status` counts its units under it
# A zoo campaign's defaults for a test's hang timeout and a worker's address space: tf2onnx takes about a minute to
# convert the Keras ResNet50 and InceptionV3 on a loaded two-core machine, and TensorFlow's address space outgrows 8 GiB
# there (a failed allocation comes out as a MemoryError, a protobuf EncodeError or a SIGSEGV, none of them a finding).
ZOO_TIMEOUT_S = 300.0
ZOO_MEMORY_MB = 16384
# The exporters an ONNX tool's upstream is drawn from for a PyTorch zoo model.
TORCH_UPSTREAMS = ("torch-onnx-dynamo", "torch-onnx-script")


class Runner(Protocol):
    """What a zoo unit asks of the worker's UnitRunner."""

    config: WorkerConfig
    registry: ConverterRegistry

    def send(self, message: Any) -> None: ...
    def hold(self, message: Any) -> None: ...
    def phase(self, idx: int, converter: str | None, phase: Step) -> None: ...
    def own_error(self, idx: int, seed: int, converter: str | None, phase: Step, exc: BaseException) -> None: ...
    def skip(self, idx: int, seed: int, name: str, label: str, message: str, options: dict[str, Any],
             start: float, timings: dict[str, float] | None = None) -> None: ...


def zoo_entries() -> list[ZooEntry]:
    """The entries that build here (the zoo extra's need it installed), in name order."""
    return [entry for entry in ZOO.values() if entry.available()[0]]


def zoo_entry_for(seed: int, entries: Sequence[ZooEntry]) -> ZooEntry:
    """The architecture of the unit of `seed`: drawn by the seed alone, so a rerun of the seed tests the same one."""
    if not entries:
        raise ValueError("no zoo entry builds here: install the zoo extra (make install)")
    return entries[random.Random(f"zoo:{seed}").randrange(len(entries))]


def zoo_options(converter: Converter, entry: ZooEntry, seed: int) -> dict[str, Any] | None:
    """The options a zoo model's test runs under: an exporter of its framework at its defaults, an ONNX tool from a
    torch exporter drawn by the seed at that exporter's default opset; None where the converter cannot take it."""
    if entry.framework is Framework.KERAS:
        return {} if converter.framework == "tensorflow" and not starts_upstream(converter) else None
    if converter.framework == "pytorch" and not starts_upstream(converter):
        return {}
    if starts_upstream(converter) and converter.framework == "onnx":
        upstream = random.Random(f"zoo-upstream:{seed}").choice(TORCH_UPSTREAMS)
        return {"upstream": upstream, "opset": upstream_default_opset(upstream)}
    return None


def takes_zoo_models(registry: ConverterRegistry, converters: Sequence[str], entries: Sequence[ZooEntry]) -> bool:
    """Whether one of `converters` can take one of the zoo models `entries` build."""
    return any(zoo_options(registry[name], entry, 0) is not None for name in converters if name in registry
               for entry in entries)


def drawn_options(converter: Converter, seed: int, fixed: Mapping[str, Any], pinned: Mapping[str, Any]
                  ) -> dict[str, Any]:
    """In a campaign that varies settings, the converter's options drawn by the seed as a graph's test draws them,
    keeping what the zoo fixes (an ONNX tool's upstream; its opset is drawn in that upstream's range) and what the
    user pinned."""
    kept = {k: v for k, v in fixed.items() if k != "opset"}
    return converter.options_type.draw(seed, {**pinned, **kept}).to_json()


def run_zoo_unit(runner: Runner, idx: int, seed: int, converters: Sequence[str]) -> None:
    """Build the seed's architecture, run it, then test it with each converter that can take it."""
    start = time.perf_counter()
    timings: dict[str, float] = {}
    try:
        entry = zoo_entry_for(seed, zoo_entries())
        prepared = prepare_zoo(entry.build(seed))
    except Exception as exc:  # building and running the source are ours, never a converter's
        runner.own_error(idx, seed, None, Step.GENERATE, exc)
        runner.send(UnitFailed(idx, timings))
        return
    timings.update(prepared.timings)
    timings["build"] = time.perf_counter() - start - sum(prepared.timings.values())
    # No graph message: a zoo unit has no graph, and a test lost to a dead or hung worker is then recorded without
    # the graph case the campaign would otherwise remake from it.
    runner.hold(UnitPrepared(idx, timings, ZOO_SOURCE))
    for name in converters:
        run_zoo_test(runner, idx, seed, prepared, name)


def run_zoo_test(runner: Runner, idx: int, seed: int, prepared: ZooSource, name: str) -> None:
    """One converter's test of the zoo model, its result held (labelled with the architecture), a bug's evidence
    written."""
    start = time.perf_counter()
    entry = prepared.zoo.entry
    converter = runner.registry[name]
    options = zoo_options(converter, entry, seed)
    if options is None:
        runner.skip(idx, seed, name, "skipped-inexpressible", f"{name} cannot take the {entry.framework.value} "
                    f"zoo model {entry.name}", {}, start)
        return
    if runner.config.vary_settings:
        options = drawn_options(converter, seed, options, runner.config.converter_options.get(name, {}))
    runner.phase(idx, name, Step.CONVERT)
    try:
        result = check_zoo(prepared, converter, options)
    except Exception as exc:  # a convsmith bug: counted and logged, never filed as the converter's
        runner.own_error(idx, seed, name, Step.CONVERT, exc)
        runner.send(TestResult.own_error(idx, seed, name, options, wall_s=time.perf_counter() - start))
        return
    result = dataclasses.replace(result, verdict=result.verdict.with_labels(f"zoo:{entry.name}"))
    case_dir = None
    if result.verdict.is_bug and result.verdict.signature:
        runner.phase(idx, name, Step.CASE)
        try:
            write_evidence(Path(runner.config.out_dir), prepared, result, options, converter)
        except OSError as exc:
            runner.own_error(idx, seed, name, Step.CASE, exc)
        case_dir = reducible_evidence(converter, result)
    runner.hold(TestResult.of_verdict(idx, seed, result.verdict, converter.options(options).to_json(),
                                      result.timings, time.perf_counter() - start, case_dir=case_dir,
                                      rewrites=result.rewrites, rewrite_classes=result.rewrite_classes))


def reducible_evidence(converter: Converter, result: ZooResult) -> str | None:
    """The evidence folder of an ONNX tool's finding, relative to the campaign folder: the campaign's reducer cuts
    it down to a case (`convsmith reduce`, fuzzer/modelcheck/zoo_finding.py); None for an exporter's, not reduced."""
    if not (starts_upstream(converter) and converter.framework == "onnx"):
        return None
    return f"{EVIDENCE_DIR}/{case_id(result.verdict.signature)}"


def reducible_findings(out_dir: Path, registry: ConverterRegistry) -> list[Path]:
    """The evidence folders of the campaign's ONNX tool findings in zoo models (what its reducer cuts down)."""
    found = []
    for folder in sorted((Path(out_dir) / EVIDENCE_DIR).glob(f"*/{EVIDENCE_RECORD}")):
        try:
            converter = registry.get(json.loads(folder.read_text(encoding="utf-8")).get("converter", ""))
        except (OSError, ValueError, AttributeError):
            continue
        if converter is not None and starts_upstream(converter) and converter.framework == "onnx":
            found.append(folder.parent)
    return found


def write_evidence(out_dir: Path, prepared: ZooSource, result: ZooResult, options: dict[str, Any],
                   converter: Converter) -> Path | None:
    """The evidence folder of a zoo finding, written once per signature (the first wins), whose bug it is decided
    as it is filed (zoo.json's `blame`, report.md); None when it exists."""
    parent = out_dir / EVIDENCE_DIR
    final = parent / case_id(result.verdict.signature)
    if final.exists():
        return None
    parent.mkdir(parents=True, exist_ok=True)
    zoo, entry = prepared.zoo, prepared.zoo.entry
    try:
        blame = zoo_blame(prepared, converter, result, options)
    except Exception as exc:  # a convsmith bug in the blame must not lose the finding: it is filed unsettled, saying so
        own = converter.component(FaultSite(result.verdict.stage, ""))
        blame = Blame(own, (f"convsmith could not examine it: {type(exc).__name__}: {exc}",), settled=False)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name[:40]}-", dir=parent))
    record = {"entry": entry.name, "framework": entry.framework.value, "seed": zoo.seed,
              "converter": result.converter, "options": options, "verdict": result.verdict.to_json(),
              "blame": blame.to_json(), "check": check_command(entry.name, zoo.seed, result.converter, options)}
    (staging / EVIDENCE_RECORD).write_text(json.dumps(record, indent=1) + "\n")
    (staging / "report.md").write_text(zoo_report(entry.name, zoo.seed, result.converter, options, result.verdict,
                                                  blame))
    if result.model is not None:
        (staging / "model.onnx").write_bytes(result.model)
    data = staging / "test_data_set_0"
    data.mkdir()
    for i, (spec, x) in enumerate(zip(entry.inputs, zoo.inputs)):
        (data / f"input_{i}.pb").write_bytes(to_proto_bytes(spec.name, x))
    for i, (name, y) in enumerate(zip(entry.outputs, prepared.eager)):
        (data / f"output_{i}.pb").write_bytes(to_proto_bytes(name, y))
    return final if atomic_publish_dir(staging, final) else None
