#!/usr/bin/env bash
# A virtual environment with ONNX Runtime and what exporting all-MiniLM-L6-v2 to ONNX needs (CPU torch, transformers,
# onnx), made once in DIR. Prints its python on the last line.
# Usage: scripts/peers/onnxruntime_venv.sh DIR
set -euo pipefail
dir=$1
python="$dir/bin/python"
if [ ! -x "$python" ] || ! "$python" -c "import onnxruntime, torch, transformers, onnx" 2>/dev/null; then
  rm -rf "$dir"
  python3 -m venv "$dir" >&2 || {
    sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    $sudo apt-get install -y -qq python3-venv >&2 && python3 -m venv "$dir" >&2
  }
  # The CPU build of torch (a find-links folder may hold it; PyPI's default build is the CUDA one).
  "$dir/bin/pip" install -q "torch==${TORCH_VERSION:-2.13.0+cpu}" >&2 || "$dir/bin/pip" install -q torch >&2
  "$dir/bin/pip" install -q "onnxruntime==${ONNXRUNTIME_VERSION:-1.31.1}" onnx onnxscript transformers >&2
fi
echo "$python"
