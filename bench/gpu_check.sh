#!/usr/bin/env bash
# The GPU path in one command, for a machine with an NVIDIA GPU (about ten minutes): the GPU build installed
# (torch from the lock, which pip takes as its CUDA build there, and onnxruntime-gpu), the device tests, a
# five-minute `--device cuda` campaign, its tests per minute and findings, and every case whose CUDA run differs
# from its CPU run. Run from the repository root: bash bench/gpu_check.sh [MINUTES]
#
# GPU_PYTHON=/path/to/python3 uses that interpreter as it is instead of installing a venv: a GPU image with no
# network that already holds torch's CUDA build, onnxruntime-gpu and convsmith's other requirements (the
# checkout itself is put on PYTHONPATH). WORKERS sets the campaign's workers (2).
set -euo pipefail
MINUTES="${1:-5}"
WORKERS="${WORKERS:-2}"
VENV="${VENV:-.venv-gpu}"
OUT="${GPU_CHECK_OUT:-build/gpu-check-$(date +%Y%m%d-%H%M%S)}"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi finds none); nothing run" >&2
    exit 3
fi
nvidia-smi -L
if [ -n "${GPU_PYTHON:-}" ]; then
    PY="$GPU_PYTHON"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    CONVSMITH=("$PY" -m fuzzer.commands.main)
else
    time make install VENV="$VENV" GPU=1
    PY="$VENV/bin/python"
    CONVSMITH=("$VENV/bin/convsmith")
fi
"$PY" - <<'PY'
import onnxruntime, torch
assert torch.cuda.is_available(), "torch sees no CUDA device (a CPU build?)"
assert "CUDAExecutionProvider" in onnxruntime.get_available_providers(), "onnxruntime-gpu has no CUDA provider"
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; onnxruntime {onnxruntime.__version__}",
      onnxruntime.get_available_providers())
PY
"${CONVSMITH[@]}" converters
"$PY" -m pytest -p no:cacheprovider -q tests/test_device.py
START=$(date +%s)
"${CONVSMITH[@]}" fuzz --device cuda --no-prepare-ahead --time "${MINUTES}m" --workers "$WORKERS" --out "$OUT"
echo "gpu_check: the campaign took $(( $(date +%s) - START )) s"
"${CONVSMITH[@]}" status "$OUT"
"$PY" bench/gpu_cpu_diff.py "$OUT"
