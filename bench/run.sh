#!/usr/bin/env bash
# Side-by-side benchmark: the machine's walls (bench_walls), larder
# (bench_decode, bench_restore) and llama.cpp (node-llama-cpp 3.21.1,
# bench/llama_cpp.mjs) on the same stories260K GGUF files in the same run,
# then one markdown report (bench/report.mjs) naming the CPU.
#
# Environment:
#   LARDER_TEST_MODELS  model directory (default: ../shared/models from the repo root)
#   LARDER_BENCH_BUILD  build directory (default: build-bench in the repo root)
#   LARDER_BENCH_RUNS   runs per measurement (default 5)
#   LARDER_BENCH_OUT    if set, the raw JSON lines are kept in this directory
#   JOBS                parallel build jobs (default 2)
# Takes about 2-4 minutes on a 2-core machine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
models=${LARDER_TEST_MODELS:-$root/../shared/models}
build=${LARDER_BENCH_BUILD:-$root/build-bench}
runs=${LARDER_BENCH_RUNS:-5}
files=("$models/stories260K.gguf" "$models/stories260K-f16.gguf" "$models/stories260K-q8_0.gguf")
for f in "${files[@]}" "$models/reference.json"; do
  [[ -f $f ]] || { echo "missing $f (set LARDER_TEST_MODELS)" >&2; exit 1; }
done

echo "== building bench programs (Release) in $build" >&2
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLARDER_CUDA=OFF >/dev/null
cmake --build "$build" --target bench_walls bench_decode bench_restore -j"${JOBS:-2}" >/dev/null

if [[ ! -d $here/node_modules/node-llama-cpp ]]; then
  echo "== installing node-llama-cpp (npm i -E --no-package-lock)" >&2
  (cd "$here" && npm i -E --no-package-lock >/dev/null)
fi

if [[ -n ${LARDER_BENCH_OUT:-} ]]; then
  out=$LARDER_BENCH_OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
ref=(--reference "$models/reference.json")

echo "== the machine's walls (read bandwidth, int8 peak)" >&2
"$build/bench/bench_walls" --json-only | tee "$out/walls.jsonl" >&2
echo "== larder decode/prefill" >&2
"$build/bench/bench_decode" --json-only --runs "$runs" "${ref[@]}" "${files[@]}" | tee "$out/larder.jsonl" >&2
echo "== llama.cpp decode/prefill" >&2
node "$here/llama_cpp.mjs" --runs "$runs" --max-seconds 3 "${ref[@]}" "${files[@]}" | tee "$out/llama_cpp.jsonl" >&2
echo "== larder TTFT cold / restored" >&2
"$build/bench/bench_restore" --json-only --runs $((runs + 2)) --synthetic-runs "$runs" "${ref[@]}" "${files[@]}" \
  | tee "$out/ttft.jsonl" >&2

echo >&2
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
echo "Machine: ${cpu:-unknown CPU}, $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%d)"
echo
node "$here/report.mjs" "$out/walls.jsonl" "$out/larder.jsonl" "$out/llama_cpp.jsonl" "$out/ttft.jsonl"
