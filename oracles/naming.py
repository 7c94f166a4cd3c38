"""Names made from free text: filename-safe slugs, and operator names squashed so ONNX's and PyTorch's compare."""

from __future__ import annotations

import re


def slug(text: str, sep: str = "-") -> str:
    """A filename-safe fragment of `text`, each run of other characters one `sep`: keys become folder names."""
    return re.sub(r"[^A-Za-z0-9_.]+", sep, text).strip(sep) or "none"


def squash_operator(name: str) -> str:
    """'max_pool2d' and 'MaxPool' -> 'maxpool': case, underscores and a dimensionality suffix dropped."""
    return re.sub(r"[123]d$", "", name.lower().replace("_", ""))
