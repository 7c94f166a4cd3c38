#!/usr/bin/env bash
# The GPU path in one command, for a machine with an NVIDIA GPU (about ten minutes): the GPU build installed
# (torch from the lock, which pip takes as its CUDA build there, and onnxruntime-gpu), the device tests, a
# five-minute `--device cuda` campaign, its tests per minute and findings, and every case whose CUDA run differs
# from its CPU run. Run from the repository root: bash bench/gpu_check.sh [MINUTES]
set -euo pipefail
MINUTES="${1:-5}"
VENV="${VENV:-.venv-gpu}"
OUT="build/gpu-check-$(date +%Y%m%d-%H%M%S)"
BIN="$VENV/bin"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi finds none); nothing run" >&2
    exit 3
fi
nvidia-smi -L
time make install VENV="$VENV" GPU=1
"$BIN/python" - <<'PY'
import onnxruntime, torch
assert torch.cuda.is_available(), "torch sees no CUDA device (a CPU build?)"
assert "CUDAExecutionProvider" in onnxruntime.get_available_providers(), "onnxruntime-gpu has no CUDA provider"
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; onnxruntime {onnxruntime.__version__}",
      onnxruntime.get_available_providers())
PY
"$BIN/python" -m pytest -p no:cacheprovider -q tests/test_device.py
"$BIN/convsmith" fuzz --device cuda --no-prepare-ahead --time "${MINUTES}m" --workers 2 --out "$OUT"
"$BIN/convsmith" status "$OUT"
"$BIN/python" bench/gpu_cpu_diff.py "$OUT"
