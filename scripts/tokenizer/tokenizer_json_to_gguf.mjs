// Usage: node tokenizer_json_to_gguf.mjs DIR PRE OUT.gguf
// DIR holds tokenizer.json and tokenizer_config.json; PRE is the value of
// tokenizer.ggml.pre (llama-bpe, qwen2, smollm, gpt-2, deepseek-llm, tekken).
import fs from "node:fs";
import path from "node:path";
import { vocabFromTokenizerJson, writeVocabGguf } from "./gguf_vocab.mjs";

const [dir, pre, out] = process.argv.slice(2);
if (!dir || !pre || !out) {
  console.error("usage: node tokenizer_json_to_gguf.mjs DIR PRE OUT.gguf");
  process.exit(2);
}
const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const v = vocabFromTokenizerJson(tj, cfg);
const n = writeVocabGguf(out, v, pre);
console.log(`${out}: ${v.tokens.length} tokens, ${v.merges.length} merges, ${n} bytes`);
