#!/usr/bin/env bash
# One-shot check of the CUDA backend on a lent GPU (docs/gpu.md): builds for
# sm_90, runs the [gpu] tests and the GPU benchmark, and writes logs and a
# results table into one folder. Budget: 8 minutes on one H200.
#
#   scripts/gpu-check.sh [OUT_DIR]      (default: $OUT, else ./gpu-check-out)
#
# Exit status: 0 when the build and every [gpu] test passed (the benchmark
# prints ratios, not pass/fail).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-$PWD/gpu-check-out}}"
mkdir -p "$out"
build="${LARDER_GPU_BUILD:-build-gpu}"
summary="$out/summary.md"
start=$(date +%s)
status=0

log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$out/progress.log"; }

{
  echo "# larder GPU check"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
} > "$summary"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1

log "configure + build (sm_90)"
# LARDER_GPU_PREBUILT=1: use the $build that scripts/gpu-bundle.sh made
# elsewhere and that was carried over, when the device machine lacks the
# build dependencies (the lent H200 image has no RocksDB, libuv, spdlog...).
if [ "${LARDER_GPU_PREBUILT:-0}" = 1 ]; then
  # scripts/gpu-bundle.sh made $build: its shared libraries are in $build/lib.
  case "$build" in /*) libdir="$build/lib" ;; *) libdir="$PWD/$build/lib" ;; esac
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "build: prebuilt $build (commit $(cat "$build/COMMIT" 2>/dev/null || echo unknown))" >> "$summary"
elif ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
       && cmake --build "$build" -j"$(nproc)" --target test_cuda test_engine bench_gpu; } > "$out/build.log" 2>&1; then
  log "BUILD FAILED (see build.log)"
  echo "build: FAILED" >> "$summary"
  tail -40 "$out/build.log"
  exit 1
else
  echo "build: ok" >> "$summary"
fi

log "[gpu] and [cuda] tests"
if timeout 180 "$build/tests/test_cuda" --durations yes --reporter console "[gpu],[cuda]" > "$out/test_gpu.log" 2>&1; then
  echo "gpu tests: passed" >> "$summary"
else
  echo "gpu tests: FAILED (test_gpu.log)" >> "$summary"
  status=1
fi
grep -E "test cases|assertions|skipped" "$out/test_gpu.log" | tail -3 | tee -a "$summary"

log "engine tests on this machine (CPU path must stay green)"
if timeout 120 "$build/tests/test_engine" > "$out/test_engine.log" 2>&1; then
  echo "engine tests: passed" >> "$summary"
else
  echo "engine tests: FAILED (test_engine.log)" >> "$summary"
  status=1
fi

log "benchmark"
timeout 300 "$build/bench/bench_gpu" --dir "$out/models" --out "$out/bench.md" > "$out/bench.log" 2>&1
bench_rc=$?
echo "bench exit: $bench_rc" >> "$summary"
rm -rf "$out/models"  # synthetic GGUF files are large and not worth fetching
[ -f "$out/bench.md" ] && cat "$out/bench.md" >> "$summary"

log "done in $(( $(date +%s) - start )) s, status $status"
cat "$summary"
exit $status
