// Times @huggingface/transformers on a text file with a tokenizer.json, and
// prints MB/s and the token count (compare with the "[.bench]" test of
// tests/tokenizer/bpe_reference_test.cpp on the same file and vocab).
// Usage: node bench_tokenizer.mjs REF_DIR TOKENIZER_DIR TEXT_FILE
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [refDir, tokDir, textFile] = process.argv.slice(2);
const req = createRequire(path.join(path.resolve(refDir), "package.json"));
const { PreTrainedTokenizer } = await import(pathToFileURL(req.resolve("@huggingface/transformers")).href);
const tj = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer_config.json"), "utf8"));
const t0 = performance.now();
const tok = new PreTrainedTokenizer(tj, cfg);
const loadS = (performance.now() - t0) / 1000;
const text = fs.readFileSync(textFile, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
let best = Infinity, n = 0;
for (let rep = 0; rep < 3; ++rep) {
  const t = performance.now();
  n = tok.encode(text, { add_special_tokens: false }).length;
  best = Math.min(best, (performance.now() - t) / 1000);
}
console.log(`transformers.js: load ${loadS.toFixed(2)} s; ${bytes} bytes -> ${n} tokens in ${best.toFixed(3)} s = ${(bytes / best / 1e6).toFixed(2)} MB/s`);
