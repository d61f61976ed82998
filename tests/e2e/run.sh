#!/usr/bin/env bash
# Runs the end-to-end tests (node:test + the official openai SDK) against the
# larderd binary in BUILD_DIR (default: build). Installs the SDK (and
# playwright-core, which drives Debian's chromium; zod and ajv for the schema tests) on first use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_dir=$(cd "${1:-build}" && pwd)
cd "$here"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/zod ] || [ ! -d node_modules/ajv ]; then
  npm install --no-audit --no-fund --no-package-lock --loglevel=error
fi
LARDER_BIN="$build_dir/daemon/larderd" node --test --test-reporter=spec "$here"/*.test.mjs
