#!/usr/bin/env bash
# Creates .venv-nnsmith (ignored by git) with NNSmith from PyPI and the onnx/onnxruntime backend, for
# bench/compare_nnsmith.py. torch is pinned to the CPU build (torch==2.13.0) and every later pip call is
# constrained to it, so that pip never resolves another (multi-GB CUDA) torch build.
#
#     bash bench/nnsmith_env.sh            # PYTHON=python3.11 VENV=.venv-nnsmith by default
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
VENV="${VENV:-.venv-nnsmith}"
TORCH="${TORCH:-torch==2.13.0}"
NNSMITH="${NNSMITH:-nnsmith==0.1.0}"

if [ -f "$VENV/.installed" ]; then
    echo "$VENV is ready"; exit 0
fi
"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install --quiet --upgrade pip
$PIP install --quiet "$TORCH"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "$TORCH" > "$constraints"
# nnsmith[onnx,onnxruntime] = nnsmith + torch + onnx + onnxruntime (z3-solver, hydra-core, hydra-colorlog,
# multipledispatch, appdirs and numpy come as its plain dependencies).
$PIP install --quiet -c "$constraints" "${NNSMITH}" onnx onnxruntime
"$VENV/bin/python" - <<'PY'
import importlib
for mod in ("torch", "onnx", "onnxruntime", "nnsmith", "hydra", "z3"):
    m = importlib.import_module(mod)
    version = m.get_version_string() if mod == "z3" else getattr(m, "__version__", "?")
    print(f"  {mod:<12} {version}")
PY
touch "$VENV/.installed"
