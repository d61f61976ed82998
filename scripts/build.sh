#!/usr/bin/env bash
# Configures and builds larder in Release into ./build (or $LARDER_BUILD_DIR).
# Uses Ninja and ccache when present. The CUDA backend is built when nvcc is
# found (pass -DLARDER_CUDA=OFF in LARDER_CMAKE_ARGS to skip it).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${LARDER_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${LARDER_CMAKE_ARGS:-}
fi
cmake --build "$build_dir" -j"$(nproc)" "$@"
