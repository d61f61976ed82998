#!/usr/bin/env bash
# CPU speed, larder against llama.cpp, as users see them: larderd through its
# HTTP API and llama.cpp through node-llama-cpp 3.21.1 on the same GGUF files
# in one run (bench/cpu.mjs), with the machine's walls measured first
# (bench_walls: read bandwidth, int8 peak) and the read wall probed again
# beside every decode run (bench_walls --read-only), then one markdown report
# naming the CPU (bench/cpu_report.mjs).
#
# The Llama-3.2-1B-shaped files are random-weight GGUFs written by the
# project's own make_synthetic (no download), once, into the model directory.
#
# Environment:
#   LARDER_BENCH_BUILD   build directory (default: build-bench in the repo root)
#   LARDER_BENCH_MODELS  where the synthetic files are kept (default: $LARDER_BENCH_BUILD/models)
#   LARDER_BENCH_TYPES   weight types of the 1B-shaped files (default: "q8_0 q4_k_m f16")
#   LARDER_BENCH_THREADS thread counts (default: 1,2)
#   LARDER_BENCH_RUNS    runs per measurement (default 3)
#   LARDER_BENCH_CONTEXTS long-context depths, e.g. 4096,16384 (default: none)
#   LARDER_BENCH_OUT     if set, the raw JSON lines are kept in this directory
#   LARDER_TEST_MODELS   if it holds stories260K.gguf, that file is measured too
#   JOBS                 parallel build jobs (default 2)
# One 1B-shaped type takes 1-2 minutes per thread count on a 2-core machine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${LARDER_BENCH_BUILD:-$root/build-bench}
models=${LARDER_BENCH_MODELS:-$build/models}
types=${LARDER_BENCH_TYPES-q8_0 q4_k_m f16}

echo "== building larderd, bench_walls, make_synthetic (Release) in $build" >&2
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLARDER_CUDA=OFF >/dev/null
cmake --build "$build" --target larderd bench_walls make_synthetic -j"${JOBS:-2}" >/dev/null

if [[ ! -d $here/node_modules/node-llama-cpp ]]; then
  echo "== installing node-llama-cpp (npm i -E --no-package-lock)" >&2
  (cd "$here" && npm i -E --no-package-lock >/dev/null)
fi

mkdir -p "$models"
files=()
for t in $types; do
  f=$models/llama-3.2-1b-$t.gguf
  if [[ ! -f $f ]]; then
    echo "== writing $f (make_synthetic --preset llama-3.2-1b --type $t)" >&2
    "$build/bench/make_synthetic" --preset llama-3.2-1b --type "$t" "$f.tmp" >&2
    mv "$f.tmp" "$f"
  fi
  files+=("$f")
done
if [[ -n ${LARDER_TEST_MODELS:-} && -f $LARDER_TEST_MODELS/stories260K.gguf ]]; then
  files+=("$LARDER_TEST_MODELS/stories260K.gguf")
fi

if [[ -n ${LARDER_BENCH_OUT:-} ]]; then
  out=$LARDER_BENCH_OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

echo "== the machine's walls (read bandwidth, int8 peak)" >&2
"$build/bench/bench_walls" --json-only | tee "$out/walls.jsonl" >&2
echo "== larder (HTTP) and llama.cpp on ${files[*]}" >&2
ctx=()
[[ -n ${LARDER_BENCH_CONTEXTS:-} ]] && ctx=(--contexts "$LARDER_BENCH_CONTEXTS")
node "$here/cpu.mjs" --larder "$build/daemon/larderd" --walls "$build/bench/bench_walls" \
  --threads "${LARDER_BENCH_THREADS:-1,2}" \
  --runs "${LARDER_BENCH_RUNS:-3}" "${ctx[@]}" "${files[@]}" | tee "$out/cpu.jsonl" >&2

echo >&2
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
echo "Machine: ${cpu:-unknown CPU}, $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%d)"
echo
node "$here/cpu_report.mjs" "$out/walls.jsonl" "$out/cpu.jsonl"
