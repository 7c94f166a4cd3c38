"""Root causes: what a maintainer fixes, as opposed to a signature (one exact behaviour, for replay).

The key keeps the converter, the stage, the symptom, the localized operator and the error's normalized class;
dtypes, shapes, values, downstream operators and the exporters' own node names are evidence, not identity. Each
root cause also gets the cause class of the published study of ONNX converter failures (type problem,
incompatibility, algorithmic error, shape mismatch, other), derived from the same evidence.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from oracles.naming import slug, squash_operator
from oracles.signature import first_lines, is_wrapper, normalise_message
from oracles.taxonomy import FAILING_NODE
from oracles.verdict import Symptom, Verdict

DTYPE_WORDS = (r"b?float(?:16|32|64)?|half|double|bfloat16|u?int(?:8|16|32|64)|bool|long|short|byte|char|"
               r"complex(?:64|128)?|float8\w*")
_DTYPES = re.compile(rf"\b(?:tensor\((?:{DTYPE_WORDS})\)|(?:torch\.)?(?:{DTYPE_WORDS}))\b", re.IGNORECASE)
# The operator an error names: ONNX's and ONNX Runtime's spellings, TensorFlow's MLIR ('tf.Acos' op, as onnx2tf's
# TFLite conversion fails) and onnx2tf's missing op module (onnx2tf.ops.BitwiseOr).
_ONNX_OP = re.compile(r"op_type\s*[:=]\s*(\w+)|running (\w+) node|Op \((\w+)\)|onnx::(\w+)|'tf\.(\w+)' op"
                      r"|onnx2tf\.ops\.(\w+)|for operator (\w+)|of operator \((\w+)\)")
# The node the converter's library was handling when it raised (oracles/taxonomy.py): the owner's own operator.
_FAILING_NODE = re.compile(re.escape(FAILING_NODE).replace(re.escape("{}"), r"(\w+)"))
_DYNAMO_NODE = re.compile(r"node name: node_([a-z][a-z0-9_]*?)(?:_\d+)?(?=[),\s])")
_ATEN_OP = re.compile(r"aten::(\w+)|target=torch\.ops\.aten\.(\w+)\.")
# The dynamo exporter wraps what failed in a ConversionError whose own words are the same for every failure; the
# exception that explains it comes first in its summary. Its words are coloured for a terminal.
_SUMMARY_ROOT = re.compile(r"## Exception summary\s*<class '([\w.]+)'>: ([^\n]*)")
# OpenVINO's frontends report every operation they failed to convert under one check of their own; the frontend's
# message for the operation (or the summary's line naming it) says why.
_UNCONVERTED = "Model wasn't fully converted"
_FRONTEND_REASON = re.compile(r"^(?:-- )?(\[(?:PyTorch|ONNX) Frontend\] .*|No conversion rule found for operations: .*|"
                              r"Conversion is failed for: .*)$", re.MULTILINE)
# A step of the frontend that failed after translating ("-- normalize step failed with: Exception from <file>:<line>:"
# then the reason on the next line).
_STEP_FAILED = re.compile(r"^-- (\w[\w ]*? step) failed with: Exception from \S+\s*\n(.+)$", re.MULTILINE)
_TERMINAL_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_NODE_NAMES = re.compile(r"node name: [^)\]]*|Name\s*:\s*'[^']*'|Node \([^)]*\)|\(op_type\s*[:=]\s*\w+,?\s*")
_NUMBERS = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_SPACES = re.compile(r"\s+")
CLASS_LENGTH = 160  # the part of a normalized message that names the class of error
# Schema type checks, keyed as a fix follows them. A type a later opset of the operator takes is one fix in the
# converter whatever the operator (export at that opset, or cast below it): the operator is evidence, not identity.
# A type no opset takes is the operator's own lowering to fix; the note fuzzer/converters/schema.py adds tells which.
_BELOW_OPSET = re.compile(r"takes tensor\((\w+)\) from opset \d+\]")
_NO_OPSET = re.compile(r"no opset of ONNX's \w+ takes tensor\((\w+)\)\]")
_UNSUPPORTED_TYPE = re.compile(r"typestr: \w+, has unsupported type: tensor\((\w+)\)")
SCHEMA_TYPE_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_BELOW_OPSET, "an operator gets {} below the opset that allows it"),
    (_NO_OPSET, "an operator gets {}, which no opset of its ONNX schema allows"),
    (_UNSUPPORTED_TYPE, "an operator gets {}, which its ONNX schema does not allow"),
    (re.compile(r"Type Error: Type 'tensor\((\w+)\)' of input parameter \(\w+\) of operator"),
     "an operator gets {}, which its ONNX schema does not allow"),
    (re.compile(r"has inconsistent type"), "an operator's inputs have types its ONNX schema requires to agree"),
)
# Crashes that one code path of a converter raises whatever ONNX operator led there, keyed by that path: onnx2tf
# lowers every broadcasting elementwise operator through the same operand layout and dtype handling, so TensorFlow's
# own shape and type checks fail alike on Add, Mul, Less or Where. The operator stays in the title as an example;
# the meaning takes the pattern's groups.
_TF_ELEMENTWISE = ("AddV2|Add|Sub|Mul|RealDiv|Div|DivNoNan|FloorDiv|FloorMod|Pow|Maximum|Minimum|Less|LessEqual|"
                   "Greater|GreaterEqual|Equal|NotEqual|LogicalAnd|LogicalOr|SelectV2|Select|BitwiseAnd|BitwiseOr|"
                   "BitwiseXor|SquaredDifference|Atan2")
SHARED_PATH_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"Dimensions must be equal, but are \d+ and \d+ for '\{{\{{node [^}}]*\}}\}} = "
                rf"(?:{_TF_ELEMENTWISE})\["),
     "a broadcasting elementwise operator's operands reach TensorFlow in shapes that do not broadcast"),
    (re.compile(rf"Input '\w+' of '(?:{_TF_ELEMENTWISE})' Op has type \w+ that does not match type \w+"),
     "a broadcasting elementwise operator's operands reach TensorFlow in two different dtypes"),
    # A converted model that declares an input in another dtype than the source's: its signature, whatever the
    # operators, as ONNX Runtime says when it is fed the source's inputs.
    (re.compile(r"Unexpected input data type\. Actual: \(tensor\((\w+)\)\) , expected: \(tensor\((\w+)\)\)"),
     "the model takes a {0} input of the source as {1}"),
    # A tool that removes the node computing a graph output (ONNX Runtime refuses the model at load), whichever it was.
    (re.compile(r"Graph output \(\w+\) does not exist in the graph"),
     "the model lists a graph output that no node computes any more"),
    # ONNX's version converter adapts every Reduce operator across opset 18 in one adapter.
    (re.compile(r"Unrecognized attribute: (\w+) for operator Reduce\w+"),
     "a Reduce operator keeps its attribute {} in an opset that does not have it"),
)
ANY_OPERATOR = "any-operator"
UNLOCALIZED = "unknown"  # the operator of a root cause whose evidence names none of its graph's
SHOWN_OPERATORS = 4  # of a graph whose failing operator is not isolated, in a title


class CauseClass(enum.Enum):
    """The cause classes of the ONNX converter failure study."""

    TYPE_PROBLEM = "type problem"
    INCOMPATIBILITY = "incompatibility"
    ALGORITHMIC_ERROR = "algorithmic error"
    SHAPE_MISMATCH = "shape mismatch"
    OTHER = "other"


@dataclass(frozen=True)
class RootCause:
    """One defect: whose (converter), where (stage), how it shows (symptom), on what (operator), which error."""

    converter: str
    stage: str
    symptom: str
    operator: str
    error_class: str
    # The real operator a title names where the key's operator stands for many (ANY_OPERATOR); not identity.
    example: str = field(default="", compare=False)

    @property
    def shown_operator(self) -> str:
        return self.example if self.operator == ANY_OPERATOR and self.example else self.operator

    @property
    def key(self) -> str:
        """'rc-<converter>-<symptom>-<operator>-<sha1[:10]>', filename-safe and stable across runs."""
        digest = hashlib.sha1("\0".join((self.converter, self.stage, self.symptom, self.operator,
                                         self.error_class)).encode()).hexdigest()[:10]
        return "-".join(("rc", slug(self.converter, "_"), slug(self.symptom, "_"),
                         slug(self.operator, "_"), digest))

    @property
    def cause(self) -> CauseClass:
        return cause_class(self.symptom, self.error_class)

    def title(self) -> str:
        """One line a person scans: converter, operator, symptom, stage, and the error class where there is one."""
        if self.error_class == OUTPUTS_MISSING:  # not a shape at all: outputs the model no longer has
            return f"{self.converter}: {OUTPUTS_MISSING} (at {self.stage.replace('_', ' ')})"
        # Not isolated: the graph's operators, one of which it is, rather than "unknown".
        operator = (f"one of {self.example}" if self.operator == UNLOCALIZED and self.example else
                    "an operator not isolated" if self.operator == UNLOCALIZED else
                    "" if self.shown_operator == ANY_OPERATOR else self.shown_operator)
        symptom = self.symptom.replace("_", " ")
        text = f"{self.converter}: {f'{operator} ' if operator else ''}{symptom} at {self.stage.replace('_', ' ')}"
        return text + (f": {self.error_class}" if self.error_class else "")


def exception_type(message: str) -> str:
    """The exception type a failure's message starts with ('builtins.TypeError: ...'), "" where it names none."""
    head = message.partition(":")[0].strip()
    return head if re.fullmatch(r"[\w.]+", head) else ""


def exception_name(message: str) -> str:
    """The short name of the exception a failure's message starts with ('TypeError'), "" where it names none."""
    return exception_type(message).rsplit(".", 1)[-1]


def explaining_error(message: str) -> str:
    """The message of the exception that explains a failure: a wrapper's summarized cause ('ValueError: Required
    parameter ...' for the dynamo exporter's ConversionError), else the message itself, without terminal colours."""
    message = _TERMINAL_COLOUR.sub("", message)
    root = _SUMMARY_ROOT.search(message)
    if root:
        return f"{root.group(1)}: {root.group(2)}"
    reason = _FRONTEND_REASON.search(message) if _UNCONVERTED in message else None
    if reason:
        return f"{exception_type(message)}: {reason.group(1).strip()}"
    step = _STEP_FAILED.search(message) if _UNCONVERTED in message else None
    if step:
        return f"{exception_type(message)}: the frontend's {step.group(1)} failed: {step.group(2).strip()}"
    return message


def error_class(exc_message: str) -> str:
    """'<ExcName>: <message>' with dtypes, numbers, quoted names, node names and the op type taken out; a schema
    type check that fails alike for every operator is named by what it means."""
    exc_message = explaining_error(exc_message)
    exc_name = exception_name(exc_message)
    message = exc_message.partition(":")[2]
    schema = _meaning(SCHEMA_TYPE_ERRORS, exc_message)
    if schema:
        return f"{exc_name}: {schema}" if exc_name else schema
    text = message if exc_name else exc_message
    text = _NODE_NAMES.sub(" ", _reason_line(text) if text.strip() else text)
    text = _DTYPES.sub("<dtype>", normalise_message(text))
    text = _NUMBERS.sub("<n>", text)
    text = _SPACES.sub(" ", text).strip(" :")[:CLASS_LENGTH]
    return f"{exc_name}: {text}" if exc_name else text


def _reason_line(text: str) -> str:
    """The message's first line; with the next where the first only wraps it (a Keras layer's wrapper)."""
    first = text.splitlines()[0]
    return first_lines(text) if is_wrapper(first.strip()) else first


def named_operator(message: str, graph_ops: Sequence[str]) -> str | None:
    """The operator an error message names, mapped back to the graph's own operator where the names agree
    (ONNX 'MaxPool' is max_pool2d, 'aten::roll' is roll, the dynamo exporter's node 'node_avg_pool2d' is avg_pool2d);
    the named ONNX operator itself otherwise."""
    aten = _ATEN_OP.search(message)
    aten_op = next((g for g in aten.groups() if g), "").rstrip("_") if aten else ""
    if aten_op in graph_ops:
        return aten_op
    # The dynamo exporter names each node after the torch operator it translates ('node_avg_pool2d' for the Squeeze
    # its avg_pool2d emits): that operator's translation is what a fix changes.
    translated = _DYNAMO_NODE.search(message)
    if translated and translated.group(1) in graph_ops:
        return translated.group(1)
    match = _ONNX_OP.search(message)
    if match is None:
        return None
    onnx_op = next(g for g in match.groups() if g)
    wanted = squash_operator(onnx_op)
    same = [op for op in dict.fromkeys(graph_ops) if squash_operator(op) == wanted]
    return same[0] if len(same) == 1 else onnx_op


def localized_operator(symptom: str, message: str, diverging_op: str | None, graph_ops: Sequence[str]) -> str:
    """The operator a root cause is filed under: the first diverging one, the one the error names, the only one
    of a (reduced) one-operator graph, else 'unknown'."""
    if diverging_op:
        return diverging_op
    if symptom not in _DIVERGENCES and _BELOW_OPSET.search(message):
        return ANY_OPERATOR
    if symptom in _DIVERGENCES:
        return _only_operator(graph_ops)
    # An operator the error itself names first; else the node the converter's library was on, in the converter's
    # own words (never mapped to the graph's spelling: 'Sub' is one operator to onnx2tf, whichever torch op made it).
    failing = _FAILING_NODE.search(message)
    named = named_operator(message[:failing.start()] if failing else message, graph_ops)
    if named:
        return named
    if failing is not None:
        return failing.group(1)
    return _only_operator(graph_ops)


def _only_operator(graph_ops: Sequence[str]) -> str:
    """The one operator of a (reduced) one-operator graph, else 'unknown'."""
    distinct = list(dict.fromkeys(graph_ops))
    return distinct[0] if len(distinct) == 1 else UNLOCALIZED


# A model with fewer (or more) outputs than the graph: oracles/judgement.py's OUTPUT_COUNT message.
_OUTPUT_COUNT = re.compile(r"target has (\d+) outputs, the graph (\d+)")
OUTPUTS_MISSING = "returns fewer outputs than the graph has"
# A wrong dtype's message names both dtypes (oracles/judgement.py): the converter's handling of that dtype is what
# a fix follows, whichever operator carried it (a final Cast lost after a float16 reduction, whatever the reduction).
_DTYPE_PAIR = re.compile(r": (\w+) where the source gives (\w+)$")


def root_cause(converter: str, stage: str, symptom: str, message: str, diverging_op: str | None,
               graph_ops: Sequence[str]) -> RootCause:
    """The root cause of one bug verdict on a graph with these operators."""
    counts = _OUTPUT_COUNT.match(message) if symptom == Symptom.WRONG_SHAPE.json_name else None
    if counts is not None:  # outputs dropped (or added), not one of the wrong shape: no operator is at fault alone
        return RootCause(converter, stage, symptom, ANY_OPERATOR, OUTPUTS_MISSING if int(counts.group(1)) <
                         int(counts.group(2)) else "returns more outputs than the graph has")
    pair = _DTYPE_PAIR.search(message) if symptom == Symptom.WRONG_DTYPE.json_name else None
    if pair is not None:
        return RootCause(converter, stage, symptom, ANY_OPERATOR, f"{pair.group(2)} output given as {pair.group(1)}",
                         diverging_op or "")
    shared = _shared_path(message) if symptom not in _DIVERGENCES else None
    if shared is not None:
        return RootCause(converter, stage, symptom, ANY_OPERATOR, shared,
                         localized_operator(symptom, message, diverging_op, graph_ops))
    operator = localized_operator(symptom, message, diverging_op, graph_ops)
    klass = "" if symptom in _DIVERGENCES else error_class(message)
    example = (named_operator(message, graph_ops) or "") if operator == ANY_OPERATOR else ""
    if operator == UNLOCALIZED:
        example = listed_operators(graph_ops)
    return RootCause(converter, stage, symptom, operator, klass, example)


def listed_operators(graph_ops: Sequence[str]) -> str:
    """'slice, matmul, amin and 2 more': the graph's distinct operators, as a title names them."""
    distinct = list(dict.fromkeys(graph_ops))
    more = f" and {len(distinct) - SHOWN_OPERATORS} more" if len(distinct) > SHOWN_OPERATORS else ""
    return ", ".join(distinct[:SHOWN_OPERATORS]) + more


def verdict_root_cause(converter: str, verdict: Verdict, graph_ops: Sequence[str]) -> RootCause:
    """The root cause of a converter's bug verdict on a graph with these operators."""
    return root_cause(converter, verdict.stage.value, verdict.symptom.json_name, verdict.message,
                      verdict.diverging_op, graph_ops)


def cause_class(symptom: str, error: str) -> CauseClass:
    """The study's cause class from the evidence: the symptom first, then the words of the error."""
    text = error.lower()
    if symptom == Symptom.WRONG_DTYPE.json_name or "<dtype>" in text or "type" in text and "typestr" in text:
        return CauseClass.TYPE_PROBLEM
    if symptom == Symptom.WRONG_SHAPE.json_name or any(w in text for w in ("shape", "dimension", "rank", "size")):
        return CauseClass.SHAPE_MISMATCH
    if symptom == Symptom.WRONG_VALUES.json_name:
        return CauseClass.ALGORITHMIC_ERROR
    if any(w in text for w in ("not support", "unsupported", "opset", "version", "no adapter", "does not support")):
        return CauseClass.INCOMPATIBILITY
    if "type" in text:
        return CauseClass.TYPE_PROBLEM
    return CauseClass.OTHER


def _shared_path(message: str) -> str | None:
    """'<ExcName>: <what the shared code path does wrong>' for a crash one of SHARED_PATH_ERRORS names; else None."""
    meaning = _meaning(SHARED_PATH_ERRORS, message)
    if meaning is None:
        return None
    name = exception_name(message)
    return f"{name}: {meaning}" if name else meaning


def _meaning(table: Sequence[tuple[re.Pattern[str], str]], message: str) -> str | None:
    """What the first of `table`'s patterns found in `message` means, with the groups it caught; None for none."""
    for pattern, meaning in table:
        found = pattern.search(message)
        if found:
            return meaning.format(*found.groups())
    return None


_DIVERGENCES = frozenset(Symptom.json_names(Symptom.divergences()))


QUOTED_CHARS = 100  # of an error's first line, in a root cause's title


def quoted_error(message: str) -> str:
    """'IndexError: tuple index out of range': the exception's own name and its message's first line (of the
    exception that explains it, where a wrapper names one)."""
    message = explaining_error(message)
    name = exception_name(message)
    first = (message.partition(":")[2] if name else message).strip().splitlines()
    line = first[0] if first else ""
    if len(line) > QUOTED_CHARS:
        line = line[:QUOTED_CHARS].rsplit(" ", 1)[0] + "…"
    return f"{name}: {line}" if name else line
