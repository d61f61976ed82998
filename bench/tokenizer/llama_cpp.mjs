// Times llama.cpp's tokenizer (node-llama-cpp 3.21.1 from bench/node_modules,
// a vocab-only load of the GGUF) encoding a text file with control-token text
// parsed, as bench_tokenizer --parse-special does. Prints one JSON line like
// bench_tokenizer. The time includes crossing from JavaScript into llama.cpp
// and back (one call for the whole text).
// usage: node llama_cpp.mjs VOCAB.gguf TEXT [--runs N] [--ids-out FILE]
import fs from "node:fs";
import path from "node:path";
import {getLlama} from "node-llama-cpp";
import {parseArgs, timeEncode} from "./timing.mjs";

const {pos: [ggufPath, textFile], runs, idsOut} =
    parseArgs("node llama_cpp.mjs VOCAB.gguf TEXT [--runs N] [--ids-out FILE]");
const llama = await getLlama({build: "never", gpu: false, logLevel: "error"});
const t0 = performance.now();
const model = await llama.loadModel({modelPath: ggufPath, vocabOnly: true});
const loadS = (performance.now() - t0) / 1000;
timeEncode({
  tool: "llama.cpp",
  vocab: path.basename(ggufPath),
  text: fs.readFileSync(textFile, "utf8"),
  encode: (text) => model.tokenize(text, true),
  runs,
  loadS,
  idsOut,
});
await model.dispose();
