"""File paths in messages, made portable: a report pasted upstream names `torch/onnx/utils.py:684`, not the finder's
virtualenv, home or checkout. Signatures and root-cause keys never read paths, so this changes no identity."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The generated model's code is convsmith's operator classes here; the case's repro.py holds it as plain PyTorch.
MODEL_CODE = "repro.py (Repro.forward)"
_PACKAGES = re.compile(r"""(?:[A-Za-z]:)?[^\s'"(<:]*[/\\](?:site|dist)-packages[/\\]""")
_OWN_SOURCE = r"""{root}/(?:generators|fuzzer|oracles)/[^\s'":]+\.py"""


def _stdlib_folders() -> tuple[str, ...]:
    """Where this interpreter's standard library lives (a frame there reads `python3.11/...`)."""
    paths = sysconfig.get_paths()
    return tuple(sorted({paths["stdlib"].rstrip("/"), paths["platstdlib"].rstrip("/")}, key=len, reverse=True))


def portable(text: str) -> str:
    """`text` with absolute paths shown relative to the library that owns them, convsmith's own operator code shown
    as the model code of repro.py, and the home folder as `~`."""
    if "/" not in text and "\\" not in text:
        return text
    text = _PACKAGES.sub("", text)
    root = re.escape(str(PROJECT_ROOT))
    own = _OWN_SOURCE.format(root=root)
    text = re.sub(rf'File "{own}", line \d+', f'File "{MODEL_CODE}"', text)
    text = re.sub(rf"{own}(?::\d+)?", MODEL_CODE, text)
    text = re.sub(rf"{root}/", "", text)
    for folder in _stdlib_folders():
        text = text.replace(f"{folder}/", f"{Path(folder).name}/")
    home = str(Path.home())
    if home not in ("/", ""):
        text = re.sub(rf"{re.escape(home)}(?=/)", "~", text)
    return text
