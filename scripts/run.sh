#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running daemon:
#   scripts/run.sh MODEL.gguf [larderd flags...]
# Installs missing packages (apt, needs root or sudo), builds in Release and
# starts larderd on http://127.0.0.1:8080 (change with --host/--port).
# Relative paths (the model, --cache-dir, --config) are relative to the
# directory you run this from.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  cat >&2 <<'USAGE'
usage: scripts/run.sh MODEL.gguf [larderd flags...]
No model given: larder serves one GGUF file (architectures llama, mistral-style
llama, qwen2, qwen3; F32, F16, BF16, Q8_0, Q4_0..Q5_1 or Q2_K..Q6_K weights). The tiny test model is
../shared/models/stories260K.gguf when you have the larder workspace; see
README.md "Models" for where to get others.
USAGE
  exit 2
fi
model=$1
shift
if [ ! -f "$model" ]; then
  echo "scripts/run.sh: model file '$model' not found" >&2
  exit 2
fi
"$root/scripts/install-deps.sh"
(cd "$root" && scripts/build.sh --target larderd larder-sim)
build_dir=${LARDER_BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
exec "$build_dir/daemon/larderd" --model "$model" "$@"
