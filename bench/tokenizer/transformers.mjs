// Times @huggingface/transformers (PreTrainedTokenizer on a local
// tokenizer.json) encoding a text file, without special tokens, as
// bench_tokenizer does for larder. Prints one JSON line like bench_tokenizer.
// usage: node transformers.mjs TOKENIZER_DIR TEXT [--runs N] [--ids-out FILE]
import fs from "node:fs";
import path from "node:path";
import {PreTrainedTokenizer} from "@huggingface/transformers";

const args = process.argv.slice(2);
const pos = [];
let runs = 5, idsOut = null;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--runs") runs = Number(args[++i]);
  else if (args[i] === "--ids-out") idsOut = args[++i];
  else pos.push(args[i]);
}
if (pos.length !== 2) {
  console.error("usage: node transformers.mjs TOKENIZER_DIR TEXT [--runs N] [--ids-out FILE]");
  process.exit(2);
}
const [tokDir, textFile] = pos;
const tj = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer_config.json"), "utf8"));
const t0 = performance.now();
const tok = new PreTrainedTokenizer(tj, cfg);
const loadS = (performance.now() - t0) / 1000;
const text = fs.readFileSync(textFile, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
let ids = [];
const seconds = [];
for (let r = 0; r < runs; ++r) {
  const t = performance.now();
  ids = tok.encode(text, {add_special_tokens: false});
  seconds.push((performance.now() - t) / 1000);
}
const sorted = [...seconds].sort((a, b) => a - b);
const best = sorted[0];
console.log(JSON.stringify({
  tool: "transformers.js",
  vocab: path.basename(tokDir),
  bytes,
  tokens: ids.length,
  load_s: loadS,
  best_s: best,
  median_s: sorted[Math.floor(sorted.length / 2)],
  mb_per_s: bytes / best / 1e6,
}));
if (idsOut) fs.writeFileSync(idsOut, JSON.stringify(Array.from(ids)) + "\n");
