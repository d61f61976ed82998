// Times @huggingface/transformers (PreTrainedTokenizer on a local
// tokenizer.json) encoding a text file, without special tokens, as
// bench_tokenizer does for larder. Prints one JSON line like bench_tokenizer.
// usage: node transformers.mjs TOKENIZER_DIR TEXT [--runs N] [--ids-out FILE]
import fs from "node:fs";
import path from "node:path";
import {PreTrainedTokenizer} from "@huggingface/transformers";
import {parseArgs, timeEncode} from "./timing.mjs";

const {pos: [tokDir, textFile], runs, idsOut} =
    parseArgs("node transformers.mjs TOKENIZER_DIR TEXT [--runs N] [--ids-out FILE]");
const tj = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer_config.json"), "utf8"));
const t0 = performance.now();
const tok = new PreTrainedTokenizer(tj, cfg);
const loadS = (performance.now() - t0) / 1000;
timeEncode({
  tool: "transformers.js",
  vocab: path.basename(tokDir),
  text: fs.readFileSync(textFile, "utf8"),
  encode: (text) => tok.encode(text, {add_special_tokens: false}),
  runs,
  loadS,
  idsOut,
});
