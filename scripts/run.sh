#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running daemon:
#   scripts/run.sh MODEL.gguf [larderd flags...]
# Installs missing packages (apt, needs root or sudo), builds in Release and
# starts larderd on http://127.0.0.1:8080 (change with --host/--port).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  cat >&2 <<'USAGE'
usage: scripts/run.sh MODEL.gguf [larderd flags...]
No model given: larder serves one GGUF file (llama architecture; F32, F16,
BF16 or Q8_0 weights). The tiny test model is ../shared/models/stories260K.gguf
when you have the larder workspace; see README.md "Models" for where to get others.
USAGE
  exit 2
fi
model=$1
shift
if [ ! -f "$model" ]; then
  echo "scripts/run.sh: model file '$model' not found" >&2
  exit 2
fi
scripts/install-deps.sh
scripts/build.sh --target larderd
exec "${LARDER_BUILD_DIR:-build}/daemon/larderd" --model "$model" "$@"
