"""Bug signatures for deduplication: a readable prefix plus a hash of the normalised essence.

A crash message names tensors, shapes, numbers, paths and addresses that change from graph to graph while the
bug stays the same; those are replaced by placeholders before hashing. Op types, dtypes and words stay.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from oracles.naming import slug

MESSAGE_CAP = 240
_DTYPE_WORD = r"(?:b?float|u?int|complex)\d+(?:_t)?"

# Applied in order; each turns one kind of incidental detail into a placeholder. Generated tensor and node
# names ('/Conv_3', 'onnx::Add_12', 'v12_out', 'input_0') go; op names ('aten::max_pool2d', 'Gelu') stay.
_NOT_DTYPE = r"(?<!::)\b(?!" + _DTYPE_WORD + r"\b)"
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)"
# A numpy array's repr (elements apart by spaces, no commas; cut at the message's first line): a value the graph
# computed, not the bug. TensorFlow prints a constant a Keras model cannot output ("... Found: [[1. 0.5]"); at one
# signature per printed value, one onnx2tf bug was 24 root causes in an hour.
_ARRAY = re.compile(r"\[[\[\s]*" + _NUMBER + r"(?:\s+(?:" + _NUMBER + r"|\.\.\.))*[\s\]]*(?![\w.,+\-])")


def _array(match: re.Match[str]) -> str:
    """<array> for a printed array: several elements, nested brackets or a non-integer element; else as it is (a
    one-element '[5]' is a shape)."""
    text = match.group(0)
    elements = text.strip("[] \t\n").split()
    several = len(elements) > 1 or text.lstrip().startswith("[[")
    return "<array>" if several or any(not e.lstrip("+-").isdigit() for e in elements) else text


_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # ONNX Runtime and shape inference name the node; its name is the exporter's choice ('/ScatterElements',
    # 'node_scatter_add', 'node_ScatterElements_2'), never the bug's.
    (re.compile(r"\bName:'[^']*'"), "Name:'<name>'"),
    (re.compile(r"\bnode name: [^\s),]+"), "node name: <name>"),
    # TorchScript IR values ("the value 'input.4 defined in (%input.4 : Tensor = onnx::Abs(%out.3)").
    (re.compile(r"'[\w.]+ defined in"), "'<value> defined in"),
    (re.compile(r"%[\w.]+"), "%<value>"),
    # A Keras layer is named by its TensorFlow op and a counter ("tf.transpose_1"): the op stays, the counter goes.
    (re.compile(r'(layer "|\{\{node )(tf\.[A-Za-z_.]*?[A-Za-z])(?:_\d+)?(?=["/])'), r"\1\2"),
    (re.compile(r"File \"[^\"]*\", line \d+"), "<path>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+\-]+){2,}\.\w+(?::\d+)*"), "<path>"),
    (_ARRAY, _array),
    # Not the digits of a decimal ("0.044714998453855515"): those are a number.
    (re.compile(r"0x[0-9a-fA-F]+|(?<![.\d])\b[0-9a-fA-F]{12,}\b"), "<hex>"),
    (re.compile(r"(?<![\w<])/[\w./:\-]+"), "<name>"),
    (re.compile(r"\b[A-Za-z_]\w*::\w*?_\d+\b"), "<name>"),
    (re.compile(_NOT_DTYPE + r"[A-Za-z_]\w*?_\d+\b"), "<name>"),
    (re.compile(_NOT_DTYPE + r"[A-Za-z]{1,3}\d+(?:_\w+)?\b"), "<name>"),
    (
        re.compile(
            r"(?:torch\.Size\()?[\[({]\s*(?:-?\d+|None|\?|s\d+)(?:\s*,\s*(?:-?\d+|None|\?|s\d+))*\s*,?\s*[\])}]\)?"
        ),
        "<shape>",
    ),
    (re.compile(r"\b\d+(?:\s*x\s*\d+)+\b"), "<shape>"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?(?![\w.])"), "<n>"),
    (re.compile(r"\s+"), " "),
)


# A first line that only wraps the error, whose reason is on the next: Keras names the layer that raised ('Exception
# encountered when calling layer "tf.pad" (type TFOpLambda).') and says why below; taken alone, every error of one
# TensorFlow op was one signature.
_WRAPPER = re.compile(r"^Exception encountered when calling layer ")


def is_wrapper(line: str) -> bool:
    """Whether `line` only wraps an error given on the next line."""
    return _WRAPPER.match(line) is not None


def first_lines(message: str) -> str:
    """The message's first non-blank line, plus the next one when the first only introduces it (ends in ':', or a
    Keras layer's wrapper)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    introduces = lines[0].endswith(":") or is_wrapper(lines[0])
    return " ".join(lines[:2]) if introduces and len(lines) > 1 else lines[0]


def normalise_message(message: str) -> str:
    """The essence of an error message: first line(s) with names, shapes, numbers and paths replaced; capped."""
    text = first_lines(message)
    for pattern, placeholder in _RULES:
        text = pattern.sub(placeholder, text)
    return text.strip()[:MESSAGE_CAP]


def normalise_frame(frame: str | None) -> str:
    """'/site-packages/onnx/checker.py:123 in check_model' -> 'checker.py in check_model'."""
    if not frame:
        return ""
    text = re.sub(r"(?:[A-Za-z]:)?(?:[^\s:/\\\"']*[\\/])+", "", frame)
    text = re.sub(r"(?::\d+|, line \d+)", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _digest(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]


def _text(value: object) -> str:
    """Enum members (Stage, Symptom) by value or name; anything else by str."""
    inner = getattr(value, "value", value)
    return getattr(value, "name", str(inner)).lower() if isinstance(inner, int) else str(inner)


def crash_signature(converter: str, stage: object, exc_type: str, message: str, frame: str | None = None) -> str:
    """'crash-<converter>-<stage>-<ExcName>-<sha1[:12]>' over converter, stage, full type, message and frame."""
    stage_text = _text(stage)
    essence = normalise_message(message)
    digest = _digest("crash", converter, stage_text, exc_type, essence, normalise_frame(frame))
    short_type = exc_type.rsplit(".", 1)[-1]
    return f"crash-{slug(converter)}-{slug(stage_text)}-{slug(short_type)}-{digest}"


def wrong_value_signature(converter: str, stage: object, symptom: object, op: str | None, dtype: str | None) -> str:
    """'<symptom>-<converter>-<stage>-<op>-<dtype>-<sha1[:12]>': one divergence kind per op and dtype."""
    parts = (_text(symptom), converter, _text(stage), op or "unknown", dtype or "unknown")
    return "-".join(slug(p) for p in parts) + "-" + _digest("divergence", *parts)
