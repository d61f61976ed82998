// Times llama.cpp's tokenizer (node-llama-cpp 3.21.1 from bench/node_modules,
// a vocab-only load of the GGUF) encoding a text file with control-token text
// parsed, as bench_tokenizer --parse-special does. Prints one JSON line like
// bench_tokenizer. The time includes crossing from JavaScript into llama.cpp
// and back (one call for the whole text).
// usage: node llama_cpp.mjs VOCAB.gguf TEXT [--runs N] [--ids-out FILE]
import fs from "node:fs";
import path from "node:path";
import {getLlama} from "node-llama-cpp";

const args = process.argv.slice(2);
const pos = [];
let runs = 5, idsOut = null;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--runs") runs = Number(args[++i]);
  else if (args[i] === "--ids-out") idsOut = args[++i];
  else pos.push(args[i]);
}
if (pos.length !== 2) {
  console.error("usage: node llama_cpp.mjs VOCAB.gguf TEXT [--runs N] [--ids-out FILE]");
  process.exit(2);
}
const [ggufPath, textFile] = pos;
const llama = await getLlama({build: "never", gpu: false, logLevel: "error"});
const t0 = performance.now();
const model = await llama.loadModel({modelPath: ggufPath, vocabOnly: true});
const loadS = (performance.now() - t0) / 1000;
const text = fs.readFileSync(textFile, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
let ids = [];
const seconds = [];
for (let r = 0; r < runs; ++r) {
  const t = performance.now();
  ids = model.tokenize(text, true);
  seconds.push((performance.now() - t) / 1000);
}
const sorted = [...seconds].sort((a, b) => a - b);
console.log(JSON.stringify({
  tool: "llama.cpp",
  vocab: path.basename(ggufPath),
  bytes,
  tokens: ids.length,
  load_s: loadS,
  best_s: sorted[0],
  median_s: sorted[Math.floor(sorted.length / 2)],
  mb_per_s: bytes / sorted[0] / 1e6,
}));
if (idsOut) fs.writeFileSync(idsOut, JSON.stringify(Array.from(ids)) + "\n");
await model.dispose();
