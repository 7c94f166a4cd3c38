"""What a process that died or hung was doing: the stage and frame read from its faulthandler dump, and the
verdict that makes of it for the converter it was running (campaign workers and the reducer's checker alike).

A segfault or abort leaves no exception to tag, only the Python stack faulthandler wrote. The innermost frame
in convsmith's converter code sits inside a `with steps.at(Stage.X, ...)` block; reading that block from the
source names the stage. A death inside the upstream export of an ONNX-to-ONNX converter is the exporter's
(Stage.SOURCE for that converter), as it is for exceptions.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from oracles.paths import portable
from oracles.signature import crash_signature
from oracles.verdict import Stage, Symptom, Verdict

# One line of a faulthandler dump: File "path", line N in function.
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')
_OURS = ("/fuzzer/converters/",)
_HANG_AFTER_S = re.compile(r"no result after (\d+(?:\.\d+)?) s")  # hang_reason's words
# The frame lost_verdict ends a message with: ' in torch/onnx/symbolic_opset9.py:1234 in _pad_circular'.
_MESSAGE_FRAME = re.compile(r" in (\S+\.py):\d+ in ([\w<>]+)$")


_TRACER = "torch/jit/_trace.py"  # torch's tracer: a fault inside it is the capture's


def stage_of_fault(dump: str) -> Stage | None:
    """The stage of the innermost `steps.at(Stage.X)` block on the dumped stack; None when it cannot tell."""
    frames = [(m.group(1), int(m.group(2)), m.group(3)) for m in map(FRAME.match, dump.splitlines()) if m]
    if any(path.endswith("/fuzzer/converters/upstream.py") and func == "export_upstream"
           for path, _, func in frames):
        return Stage.SOURCE
    for path, line, _ in frames:  # faulthandler lists the innermost frame first
        if path.endswith(_TRACER):  # torch.onnx.export traces the module inside its "export" block
            return Stage.CAPTURE
        if any(part in path for part in _OURS):
            return _stage_blocks(path).get(line)
    return None


@functools.lru_cache(maxsize=64)
def _stage_blocks(path: str) -> dict[int, Stage]:
    """Line number -> stage of the innermost literal `with <x>.at(Stage.NAME, ...)` block around it."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return {}
    lines: dict[int, Stage] = {}
    blocks = sorted((n for n in ast.walk(tree) if isinstance(n, ast.With)), key=lambda n: n.lineno)
    for node in blocks:  # outer blocks first, so inner ones overwrite their lines
        stage = next(filter(None, (_literal_stage(item.context_expr) for item in node.items)), None)
        if stage is not None:
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                lines[line] = stage
    return lines


def _literal_stage(expr: ast.expr) -> Stage | None:
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "at"):
        return None
    first = expr.args[0] if expr.args else None
    if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "Stage":
        return Stage.__members__.get(first.attr)
    return None


def fault_file(log_dir: str | Path, pid: int) -> Path:
    """Where a confined process with this pid leaves its faulthandler dumps."""
    return Path(log_dir) / f"worker-{pid}.fault"


def log_file(log_dir: str | Path, pid: int) -> Path:
    """Where a confined process with this pid writes its stdout and stderr (and glibc its abort message)."""
    return Path(log_dir) / f"worker-{pid}.log"


# A confined process writes its threads' tracebacks to its fault file on this signal (fuzzer/support/confine.py): the
# campaign sends it to a hung worker before the kill, which costs a test nothing (a per-test watchdog thread would
# start and join a thread every test).
STACK_DUMP_SIGNAL = signal.SIGUSR1


def request_stack_dump(pid: int, path: Path, wait_s: float = 1.0) -> None:
    """Have the confined process `pid` dump its tracebacks into its fault file `path`, and wait (at most `wait_s`)
    until the file has grown: the dump is written from the signal handler, whatever the process is stuck in."""
    before = _size(path)
    try:
        os.kill(pid, STACK_DUMP_SIGNAL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait_s
    while _size(path) == before and time.monotonic() < deadline:
        time.sleep(0.01)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def fault_frame(path: Path) -> tuple[str, str]:
    """(innermost frame, the last faulthandler dump) from a fault file; ('', '') when there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "", ""
    blocks = re.split(r"(?m)^(?=(?:Fatal Python error|Current thread|Thread|Stack|Timeout \())", text)
    dumps = [b for b in blocks if FRAME.search(b.splitlines()[1] if len(b.splitlines()) > 1 else "")]
    if not dumps:
        return "", text[-4000:]
    last = dumps[-1]
    match = next(m for m in map(FRAME.match, last.splitlines()) if m)
    return f"{match.group(1)}:{match.group(2)} in {match.group(3)}", last[-4000:]


def describe_exit(code: int | None) -> str:
    """'killed by SIGSEGV', 'exited with status 3' or 'still running', for a process's exit code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


# glibc's malloc checks abort with one of these lines on stderr (malloc_printerr): the heap was corrupted earlier,
# by whatever wrote out of bounds, and the check fires at the next allocation that meets the damage.
_HEAP_CHECK = re.compile(r"^(?:\w+\(\): .*(?:invalid|corrupt|double free|unaligned).*|double free or corruption.*|"
                         r"corrupted (?:size vs\. prev_size|double-linked list).*)$")
HEAP_CORRUPTION = "heap corruption detected by glibc"


@dataclass(frozen=True)
class Fault:
    """What a dead or killed process left: its innermost frame, its last faulthandler dump, and glibc's heap-check
    message when that is what aborted it ('' when not)."""

    frame: str
    dump: str
    heap_check: str = ""


def read_fault(log_dir: str | Path, pid: int) -> Fault:
    """The fault of the confined process `pid`, from its fault file and the tail of its log."""
    frame, dump = fault_frame(fault_file(log_dir, pid))
    return Fault(frame, dump, heap_check(log_file(log_dir, pid)))


def heap_check(log: Path, tail_bytes: int = 4096) -> str:
    """The last glibc heap-check message in the log's tail ('free(): invalid pointer'), or ''."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(handle.seek(0, os.SEEK_END) - tail_bytes, 0))
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if _HEAP_CHECK.match(line.strip())), "")


def lost_verdict(converter: str, symptom: Symptom, reason: str, fault: Fault) -> Verdict:
    """The verdict of a conversion whose process died, hung or ran out of memory: its stage read from the dump
    (a death in the upstream export is the exporter's, stage source), its signature from the reason and frame.
    A heap-corruption abort is signed without its frame, which only says where glibc noticed the damage: one
    corrupting call in torch.onnx aborts in four to six different frames."""
    stage = stage_of_fault(fault.dump) or Stage.NONE
    labels = ("stage-unknown",) if stage is Stage.NONE else ()
    if symptom is Symptom.PROCESS_DEATH and fault.heap_check:
        signature = crash_signature(converter, stage, symptom.name, HEAP_CORRUPTION)
        reason = f"{reason}, {HEAP_CORRUPTION} ({fault.heap_check})"
    else:
        signature = crash_signature(converter, stage, symptom.name, reason, fault.frame)
    message = portable(f"{symptom.json_name}: {reason}" + (f" in {fault.frame}" if fault.frame else ""))
    return Verdict(symptom, stage, converter, signature=signature, message=message, labels=labels)


def hang_reason(timeout_s: float) -> str:
    """Why a conversion was taken for hung: 'no result after 60 s' (hang_seconds reads it back)."""
    return f"no result after {timeout_s:g} s"


def hang_seconds(message: str) -> float | None:
    """The timeout a hang_reason in `message` names, None where it names none."""
    found = _HANG_AFTER_S.search(message)
    return float(found.group(1)) if found else None


def message_frame(line: str) -> tuple[str, str] | None:
    """(file, function) of the innermost frame lost_verdict ended a message's line with, None where it ended in none."""
    found = _MESSAGE_FRAME.search(line)
    return (found.group(1), found.group(2)) if found else None


def without_frame(line: str) -> str:
    """A message's line without the innermost frame lost_verdict ended it with."""
    return _MESSAGE_FRAME.sub("", line)
