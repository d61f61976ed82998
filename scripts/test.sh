#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to every test run:
#   scripts/test.sh
# Installs missing packages, builds everything in Release, runs the Catch2
# suites through CTest (C++ unit, integration and HTTP tests) and the
# end-to-end tests with the official openai npm SDK against a real larderd.
# The real test model is looked up in $LARDER_TEST_MODELS (default:
# ../shared/models); tests that need it are skipped with a message when absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build_dir=${LARDER_BUILD_DIR:-build}
export LARDER_TEST_MODELS=${LARDER_TEST_MODELS:-$(cd .. && pwd)/shared/models}
if [ ! -f "$LARDER_TEST_MODELS/stories260K.gguf" ]; then
  echo "note: no test model in $LARDER_TEST_MODELS: the tests that need it are SKIPPED" \
       "(set LARDER_TEST_MODELS to the folder holding stories260K.gguf)" >&2
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "note: no CUDA device: the [gpu] test cases report themselves as skipped" \
       "(scripts/gpu-check.sh runs them on a machine with a GPU)" >&2
fi
status=0
(cd "$build_dir" && ctest --output-on-failure --timeout 900) || status=1
if [ -f tests/e2e/package.json ]; then
  tests/e2e/run.sh "$build_dir" || status=1
fi
exit $status
