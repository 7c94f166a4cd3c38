"""The reducer's checker: every candidate is checked in a confined child process, so a candidate that kills its
process, hangs or exhausts its memory gets a verdict like any other, and a segfault or a hang reduces too.

The child is long-lived (one per reduction process, replaced after each death) and confined like a campaign
worker (fuzzer/support/confine.py); it also checks the reduced case in full, diagnoses whose bug it is and writes
its folder. Messages are JSON. A death is read from the child's faulthandler dump into the same verdict the
campaign gives it (fuzzer/support/faults.py), so a reduced case keeps the campaign's signature.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import tempfile
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from fuzzer.cases.case import CaseData, case_from_result, case_log, collect_versions, lost_case, remade_source
from fuzzer.cases.folder import write_case
from fuzzer.check.pipeline import CheckOptions, check_prepared, prepare
from fuzzer.check.result import FULL_CHECK, CheckResult
from fuzzer.converters import DEFAULT_REGISTRY, ConverterRegistry, load_registry
from fuzzer.diagnosis.blame import blame_case
from fuzzer.diagnosis.whose_bug import with_blame, with_diagnosis
from fuzzer.support.confine import DEFAULT_MEMORY_MB, confine
from fuzzer.support.faults import describe_exit, fault_file, hang_reason, lost_verdict, read_fault, request_stack_dump
from fuzzer.support.scratch import scratch_root, sweep_dead
from generators.ir import Graph
from generators.values import ValueStrategy
from oracles.taxonomy import memory_verdict
from oracles.verdict import Symptom, Verdict

REDUCE_CHECK = CheckOptions(rerun=False, locate=True, culprit=False)  # locate: the signature depends on it
START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class CheckerConfig:
    """How the child is confined and where it finds its converters."""

    registry: str = DEFAULT_REGISTRY
    timeout_s: float = 60.0  # per check, as a campaign worker's test
    memory_mb: int = DEFAULT_MEMORY_MB
    device: str = "cpu"  # "cuda" where a case may run on the GPU: no address-space limit then (see confine)
    log_dir: str = ""  # "": a temporary folder, removed on close


@dataclass(frozen=True)
class Job:
    """One check of a candidate graph; `case` asks the child to write the full case folder too."""

    graph: Graph
    seed: int
    converter: str
    options: Mapping[str, Any]
    device: str = "cpu"  # where the source and ONNX Runtime run (the case's device)
    values: str = "uniform"  # how the inputs are drawn (the case's value strategy)

    def message(self, kind: str, **extra: Any) -> dict[str, Any]:
        return {"type": kind, "graph": self.graph.to_json(), "seed": self.seed, "converter": self.converter,
                "options": dict(self.options), "device": self.device, "values": self.values, **extra}


class IsolatedChecker:
    """Checks graphs in a confined child; `verdict` and `write_case` never raise for what the converter does."""

    def __init__(self, config: CheckerConfig = CheckerConfig()) -> None:
        self.config = config
        self._tmp = None if config.log_dir else tempfile.TemporaryDirectory(prefix="convsmith-reduce-")
        self.log_dir = Path(config.log_dir or self._tmp.name)  # type: ignore[union-attr]
        self.registry: ConverterRegistry = load_registry(config.registry)
        self.ctx = multiprocessing.get_context("forkserver")
        self.proc: Any = None
        self.conn: Connection | None = None
        self.deaths = 0
        self.answered = 0  # requests the running child has answered
        self._last_dump = ""

    def __enter__(self) -> IsolatedChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verdict(self, job: Job, check_options: CheckOptions = REDUCE_CHECK) -> Verdict:
        """The candidate's verdict (a death, hang or memory exhaustion included); RuntimeError for our own bugs."""
        reply = self._ask_alone(job, job.message("check", check=asdict(check_options)))
        return reply if isinstance(reply, Verdict) else Verdict.from_json(reply["verdict"])

    def write_case(self, job: Job, out_dir: Path, case_id: str, original: str | None,
                   reduction: Mapping[str, Any] | None, diagnose: bool = True) -> tuple[Path, Verdict]:
        """Check `job` in full and write its case folder (replacing one of the same id), diagnosed (whose bug it
        is) unless told not to; a child that dies doing so (a fresh one too, where it had answered before) leaves
        the case of its death, written here."""
        reply = self._ask_alone(job, job.message("case", out=str(out_dir), case_id=case_id, original=original,
                                                 reduction=None if reduction is None else dict(reduction),
                                                 diagnose=diagnose))
        if isinstance(reply, Verdict):
            versions = collect_versions(self.registry[job.converter].distributions)
            source = remade_source(job.graph, job.seed, job.options, job.device, job.values)
            case = lost_case(job.graph, job.seed, job.converter, job.options, reply, versions, self._last_dump,
                             case_id_=case_id, original=original, device=job.device, values=job.values,
                             source=source)
            case = _with_reduction(case, reduction)
            converter = self.registry[job.converter]
            # Whose bug it is from the death's stack: a rerun here would die or hang again.
            case = dataclasses.replace(case, blame=blame_case(case, None, converter))
            return write_case(out_dir, case, replace=True, converter=converter), reply
        return Path(reply["path"]), Verdict.from_json(reply["verdict"])

    # ---- the child's lifecycle --------------------------------------------------------------------------

    def _ask_alone(self, job: Job, message: dict[str, Any]) -> dict[str, Any] | Verdict:
        """_ask, and again once in a fresh child where a child that had answered before died: it may have died of
        what an earlier request did (TensorFlow's heap, corrupted by one conversion, aborts in the next)."""
        answered_before = self.answered
        reply = self._ask(job, message)
        if isinstance(reply, Verdict) and reply.symptom is Symptom.PROCESS_DEATH and answered_before:
            reply = self._ask(job, message)
        return reply

    def _ask(self, job: Job, message: dict[str, Any]) -> dict[str, Any] | Verdict:
        """Send one request; the reply, or the verdict of the child's death, hang or start failure."""
        self._ensure_started()
        assert self.conn is not None
        try:
            self.conn.send_bytes(json.dumps(message).encode())
        except OSError:
            pass  # it died; the wait below sees the exit
        ready = wait([self.conn, self.proc.sentinel], timeout=self.config.timeout_s)
        if self.conn in ready:
            try:
                reply = json.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                reply = None
            if reply is not None:
                if "error" in reply:
                    raise RuntimeError(f"the reducer's checker failed on its own: {reply['error']}")
                self.answered += 1
                return reply
        if not ready:  # no reply in time: a hang, whose tracebacks are asked for before the kill
            request_stack_dump(self.proc.pid, fault_file(self.log_dir, self.proc.pid))
            return self._lost(job, Symptom.HANG, hang_reason(self.config.timeout_s))
        self.proc.join(timeout=10)  # its pipe closes before its exit status is known
        return self._lost(job, Symptom.PROCESS_DEATH, describe_exit(self.proc.exitcode))

    def _lost(self, job: Job, symptom: Symptom, reason: str) -> Verdict:
        pid = self.proc.pid
        self._stop()
        self.deaths += 1
        fault = read_fault(self.log_dir, pid)
        self._last_dump = fault.dump
        return lost_verdict(job.converter, symptom, reason, fault)

    def _ensure_started(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            return
        self._stop()
        self.answered = 0
        parent, child = self.ctx.Pipe()
        config = json.dumps(asdict(self.config) | {"log_dir": str(self.log_dir)})
        self.proc = self.ctx.Process(target=checker_main, args=(child, config), name="convsmith-reduce-check")
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(START_TIMEOUT_S) or json.loads(parent.recv_bytes()).get("type") != "ready":
            raise RuntimeError(f"the reducer's checker did not start ({describe_exit(self.proc.exitcode)}); "
                               f"see {self.log_dir}")

    def _stop(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn = None, None

    def close(self) -> None:
        """Stop the child and remove the temporary log folder."""
        if self.conn is not None and self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send_bytes(json.dumps({"type": "stop"}).encode())
                self.proc.join(timeout=5)
            except OSError:
                pass
        self._stop()
        sweep_dead(scratch_root(self.log_dir))
        if self._tmp is not None:
            self._tmp.cleanup()


def _with_reduction(case: CaseData, reduction: Mapping[str, Any] | None) -> CaseData:
    return dataclasses.replace(case, reduction=None if reduction is None else dict(reduction))


# ---- the child ------------------------------------------------------------------------------------------

def checker_main(conn: Connection, config_json: str) -> None:
    """Entry point of the checker child: confine, say ready, answer requests until told to stop."""
    config = CheckerConfig(**json.loads(config_json))
    confine(config.memory_mb, config.device, config.log_dir)  # faulthandler holds its fault file open
    registry = load_registry(config.registry)
    conn.send_bytes(json.dumps({"type": "ready", "pid": os.getpid()}).encode())
    while True:
        try:
            message = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        if message.get("type") not in ("check", "case"):
            return
        try:
            reply = _answer(message, registry)
        except Exception:  # convsmith's own bug: the parent raises it
            reply = {"error": traceback.format_exc(limit=8)}
        conn.send_bytes(json.dumps(reply).encode())


def _answer(message: Mapping[str, Any], registry: ConverterRegistry) -> dict[str, Any]:
    graph, seed, device = Graph.from_json(message["graph"]), int(message["seed"]), message["device"]
    converter = registry[message["converter"]]
    full = message["type"] == "case"
    check_options = FULL_CHECK if full else CheckOptions(**message["check"])
    timings: dict[str, float] = {}
    try:
        values = ValueStrategy(message.get("values", ValueStrategy.UNIFORM.value))
        prepared = prepare(graph, seed, timings, check_options.input_budget_s, device, values)
        result = check_prepared(prepared, converter, message["options"], check_options)
    except MemoryError:
        result = CheckResult(memory_verdict(converter.name), {}, options=dict(message["options"]))
    if not full:
        return {"verdict": result.verdict.to_json()}
    result = dataclasses.replace(result, timings={**timings, **result.timings})
    case = case_from_result(result, graph, seed, converter.name, collect_versions(converter.distributions),
                            log=case_log(result), case_id_=message["case_id"], original=message["original"],
                            device=device)
    case = _with_reduction(case, message["reduction"])
    # Whose bug it is reruns converters: here, where a death is contained. A quick reduction's case gets the
    # checks that decide it; the full diagnosis (every level and pass, a suggested fix, a workaround) waits.
    if message.get("diagnose", True):
        case = with_diagnosis(case, converter)
    elif result.verdict.is_bug:
        case = with_blame(case, converter, result.expected)
    path = write_case(Path(message["out"]), case, replace=True, converter=converter)
    return {"verdict": result.verdict.to_json(), "path": str(path)}
