#!/usr/bin/env bash
# Concurrent streaming clients (bench/clients.mjs, the official openai SDK)
# against larderd on stories260K.gguf and on a Llama-3.2-1B-shaped Q8_0 file
# (make_synthetic --preset llama-3.2-1b --type q8_0: random weights, a
# synthetic vocabulary of Llama 3's size): 1, 8 and 32 clients, DURATION
# seconds each, one markdown table per model.
#
# Environment: LARDER_TEST_MODELS (default ../shared/models from the repo
# root), LARDER_BENCH_BUILD (default build-bench), JOBS (default 2),
# DURATION (default 60), CLIENTS (default 1,8,32), MAX_TOKENS (default 64),
# THREADS (the daemon's --threads, default 0: all cores), MAX_RUNNING (the
# daemon's [engine] max_running; default its own, 8), SKIP_1B=1
# (stories260K only). Installs bench/package.json's packages into
# bench/node_modules when the openai SDK is missing there. The 1B file
# (about 1.3 GB) is kept in the build directory for the next run.
# Smoke test: DURATION=5 SKIP_1B=1 bench/clients.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
models=${LARDER_TEST_MODELS:-$root/../shared/models}
build=${LARDER_BENCH_BUILD:-$root/build-bench}

echo "== building larderd and make_synthetic (Release) in $build" >&2
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLARDER_CUDA=OFF >/dev/null
targets=(larderd)
[[ -n ${SKIP_1B:-} ]] || targets+=(make_synthetic)
cmake --build "$build" --target "${targets[@]}" -j"${JOBS:-2}" >/dev/null

if [[ ! -d $here/node_modules/openai ]]; then
  echo "== installing bench/package.json (npm i -E --no-package-lock)" >&2
  (cd "$here" && npm i -E --no-package-lock --no-audit --no-fund --loglevel=error >&2)
fi

files=("$models/stories260K.gguf")
if [[ -z ${SKIP_1B:-} ]]; then
  data=$build/grammar-bench
  mkdir -p "$data"
  if [[ ! -f $data/llama-3.2-1b-q8_0.gguf ]]; then
    echo "== writing the Llama-3.2-1B-shaped Q8_0 file" >&2
    "$build/bench/make_synthetic" --preset llama-3.2-1b --type q8_0 "$data/llama-3.2-1b-q8_0.gguf" >&2
  fi
  files+=("$data/llama-3.2-1b-q8_0.gguf")
fi

opts=(--clients "${CLIENTS:-1,8,32}" --duration "${DURATION:-60}" --max-tokens "${MAX_TOKENS:-64}"
      --threads "${THREADS:-0}")
[[ -z ${MAX_RUNNING:-} ]] || opts+=(--max-running "$MAX_RUNNING")
status=0
echo "Machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%d)"
for f in "${files[@]}"; do
  echo "== $(basename "$f")" >&2
  node "$here/clients.mjs" --bin "$build/daemon/larderd" --model "$f" "${opts[@]}" || status=1
done
exit $status
