#!/usr/bin/env bash
# Regenerates tests/engine/fixtures/chat_<name>.json: writes the chat models
# of tests/support/chat_models.h with BUILD_DIR/tests/test_engine, renders the
# conversation with Python's Jinja2 and runs llama.cpp (node-llama-cpp
# 3.21.1 from bench/node_modules) on the same files.
# Usage: scripts/chat/make_chat_reference.sh [BUILD_DIR]   (from anywhere)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=$(cd "${1:-$repo/build}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LARDER_CHAT_MODEL_OUT="$tmp" "$build_dir/tests/test_engine" "[.chat-model-write]" > /dev/null
cd "$repo"
node scripts/chat/llama_cpp_chat_reference.mjs "$tmp" tests/engine/fixtures
