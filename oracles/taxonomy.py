"""The failure taxonomy: a library failure (stage, exception, message, frame) becomes a symptom and a verdict.

Documented "not implemented" messages of the libraries under test are `unsupported` (counted, never bugs); a
model that validation or the runtime refuses to load is `invalid_model`; anything else raised is a `crash`.
"""

from __future__ import annotations

import functools
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field

from oracles.paths import portable
from oracles.signature import crash_signature
from oracles.verdict import Stage, Symptom, Verdict

# ONNX Runtime's words for a node it has no kernel for (its NOT_IMPLEMENTED kernel lookup).
KERNEL_MISSING_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"Could not find an implementation for",
    r"\bNOT_IMPLEMENTED\b",
))
UNSUPPORTED_PATTERNS: tuple[re.Pattern[str], ...] = KERNEL_MISSING_PATTERNS + tuple(
    re.compile(p, re.IGNORECASE) for p in (
    r"Unsupported: ONNX export of",  # TorchScript exporter symbolic_helper
    r"does NOT support exporting",  # TorchScript exporter symbolic_opset*: "... for non-boolean input values"
    r"is not supported",  # "Exporting the operator 'aten::x' to ONNX opset version N is not supported"
    r"No ONNX function found for",  # dynamo exporter: torchlib has no translation
    r"no (?:registered )?decomposition",
    r"No Adapter (?:From|To|For)",  # onnx.version_converter
    r"No Previous Version of \w+ exists",  # onnx.version_converter: an operator newer than the target opset
    r"not implemented for",  # kernels missing for a dtype ("... not implemented for 'Half'")
))
UNSUPPORTED_TYPES = ("UnsupportedOperatorError",)
MESSAGE_LIMIT = 2000


@dataclass(frozen=True)
class Failure:
    """A library failure: the stage it happened in, the exception type, message and innermost frame; the full
    traceback is formatted from `raised` when asked for (only a new case's log reads it)."""

    stage: Stage
    exc_type: str
    message: str
    frame: str
    raised: BaseException | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, stage: Stage, exc: BaseException) -> Failure:
        """The failure an exception raised at `stage` describes, with its innermost frame."""
        exc_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
        return cls(stage, exc_type, str(exc), innermost_frame(exc), exc)

    @functools.cached_property
    def node_type(self) -> str:
        """The type of the graph node the library was handling when it raised ("" when no frame says)."""
        return failing_node_type(self.raised) if self.raised is not None else ""

    @functools.cached_property
    def traceback(self) -> str:
        """The exception's full traceback as Python prints it ("" for a failure made without one). Formatting
        looks up every frame's source line: about a millisecond, spent on most tests when done eagerly."""
        exc = self.raised
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) if exc is not None else ""


def innermost_frame(exc: BaseException) -> str:
    """"file:line in function" of the frame that raised `exc` ("" without a traceback)."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}"


# The locals a converter's frames hold the node they are converting in: onnx2tf's make_node(graph_node), symbolic
# shape inference's loop (node), tf2onnx's handlers (node), onnxscript's and onnx-graphsurgeon's passes (node).
_NODE_LOCALS = ("graph_node", "node", "onnx_node")
_LIBRARY_FRAME = ("site-packages", "dist-packages")
FAILING_NODE = "failing node: op_type={}"  # how a crash's message names the node (oracles/rootcause.py reads it)


def failing_node_type(exc: BaseException) -> str:
    """The op type of the innermost library frame's node local (an ONNX NodeProto or IR node, onnx-graphsurgeon's
    or tf2onnx's node), so a crash whose message names no operator is still filed under the one it failed on."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        if not any(part in frame.f_code.co_filename for part in _LIBRARY_FRAME):
            continue
        for name in _NODE_LOCALS:
            found = _op_type(frame.f_locals.get(name))
            if found:
                return found
    return ""


def _op_type(node: object) -> str:
    """A node's op type where the object is one of the node kinds converters use (a TorchScript node's kind is
    'aten::view': its operator, 'view'), else ""."""
    module = type(node).__module__ or ""
    kind = getattr(node, "kind", None) if module.startswith("torch") else None
    if callable(kind):
        name = str(kind()).rpartition("::")[2]
        return name if name.isidentifier() else ""
    for attribute, modules in (("op_type", ("onnx", "onnx_ir", "onnxscript")), ("op", ("onnx_graphsurgeon",)),
                               ("type", ("tf2onnx",))):
        value = getattr(node, attribute, None) if module.startswith(modules) else None
        if isinstance(value, str) and value.isidentifier():
            return value
    return ""


def lacks_kernel(message: str) -> bool:
    """Whether `message` is ONNX Runtime saying it has no kernel for a node."""
    return any(p.search(message) for p in KERNEL_MISSING_PATTERNS)


def classify(failure: Failure, unsupported: Sequence[str] = ()) -> Symptom:
    """Unsupported when a documented not-implemented message (or one of `unsupported`, the converter's own); invalid
    model when validation or load refuses."""
    if failure.exc_type.endswith(UNSUPPORTED_TYPES) or any(p.search(failure.message) for p in UNSUPPORTED_PATTERNS):
        return Symptom.UNSUPPORTED
    if any(re.search(p, failure.message, re.IGNORECASE) for p in unsupported):
        return Symptom.UNSUPPORTED
    if failure.exc_type.endswith("MemoryError"):
        return Symptom.OUT_OF_MEMORY
    if failure.stage in (Stage.VALIDATION, Stage.RUNTIME_LOAD):
        return Symptom.INVALID_MODEL
    return Symptom.CRASH


def failure_verdict(converter: str, failure: Failure, unsupported: Sequence[str] = ()) -> Verdict:
    """The verdict of a converter's own failure; `unsupported`: the converter's documented not-implemented messages
    (regular expressions), beside those every library shares."""
    signature = crash_signature(converter, failure.stage, failure.exc_type, failure.message, failure.frame)
    node = f"\n({FAILING_NODE.format(failure.node_type)})" if failure.node_type else ""
    message = portable(f"{failure.exc_type}: {failure.message}")[:MESSAGE_LIMIT - len(node)] + node
    return Verdict(classify(failure, unsupported), failure.stage, converter, signature=signature, message=message)


def upstream_verdict(converter: str, upstream: str, failure: Failure, labels: tuple[str, ...] = (),
                     symptom: Symptom | None = None) -> Verdict:
    """The exporter `converter` starts from failed: the source's problem (unsupported stays unsupported); `labels`
    and `symptom` (else the failure's class) where the upstream says more."""
    f = failure
    signature = crash_signature(f"{converter}<-{upstream}", f.stage, f.exc_type, f.message, f.frame)
    node = f"\n({FAILING_NODE.format(f.node_type)})" if f.node_type else ""
    message = portable(f"upstream {upstream} failed at {f.stage.value}: {f.exc_type}: {f.message}")
    return Verdict(symptom or classify(f), Stage.SOURCE, converter, signature=signature,
                   message=message[:MESSAGE_LIMIT - len(node)] + node,
                   labels=tuple(sorted({f"upstream:{upstream}", *labels})))


def memory_verdict(converter: str) -> Verdict:
    """A test that ran out of the worker's memory (no stage is known)."""
    signature = crash_signature(converter, Stage.NONE, "MemoryError", "out of memory", "")
    return Verdict(Symptom.OUT_OF_MEMORY, Stage.NONE, converter, signature=signature,
                   message="MemoryError: the worker's memory limit was reached", labels=("stage-unknown",))
