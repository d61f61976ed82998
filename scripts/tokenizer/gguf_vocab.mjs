// Turns an HF tokenizer.json (+ tokenizer_config.json) into a vocab-only GGUF
// v3 file (layout: ggml docs/gguf.md) with the keys llama.cpp reads for a
// byte-level BPE vocab: tokenizer.ggml.model "gpt2", .pre, .tokens,
// .token_type (1 normal, 3 control = added special token, 4 user-defined =
// other added token), .merges ("left right"), bos/eos ids, add_bos/add_eos.
// general.architecture is "llama" with tiny hparams so llama.cpp loads it
// with vocabOnly.
import fs from "node:fs";

const T = { u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9 };

class Out {
  constructor() { this.parts = []; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.parts.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.parts.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.parts.push(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.parts.push(b); }
  str(s) { const b = Buffer.from(s, "utf8"); this.u64(b.length); this.parts.push(b); }
  raw(b) { this.parts.push(b); }
  buffer() { return Buffer.concat(this.parts); }
}

// The vocab as arrays (id order), from tokenizer.json's model + added_tokens.
export function vocabFromTokenizerJson(tj, cfg) {
  const vocab = tj.model.vocab;
  let n = 0;
  for (const id of Object.values(vocab)) n = Math.max(n, id + 1);
  for (const a of tj.added_tokens) n = Math.max(n, a.id + 1);
  const tokens = new Array(n).fill(null);
  const types = new Array(n).fill(1);
  for (const [text, id] of Object.entries(vocab)) tokens[id] = text;
  for (const a of tj.added_tokens) {
    tokens[a.id] = a.content;
    types[a.id] = a.special ? 3 : 4;
  }
  for (let i = 0; i < n; ++i) {
    if (tokens[i] === null) { tokens[i] = `[PAD${i}]`; types[i] = 5; }  // unused
  }
  const merges = tj.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const idOf = (content) => {
    if (content == null) return -1;
    const text = typeof content === "string" ? content : content.content;
    const a = tj.added_tokens.find((t) => t.content === text);
    return a ? a.id : (vocab[text] ?? -1);
  };
  const bos = idOf(cfg.bos_token), eos = idOf(cfg.eos_token);
  // HF adds BOS through the post-processor (TemplateProcessing) or add_bos_token.
  const post = JSON.stringify(tj.post_processor ?? {});
  const addBos = cfg.add_bos_token ?? (bos >= 0 && post.includes("TemplateProcessing") && post.includes(cfg.bos_token));
  return { tokens, types, merges, bos, eos, addBos: !!addBos, addEos: !!cfg.add_eos_token };
}

export function writeVocabGguf(path, v, pre) {
  const kv = [];
  const add = (key, fn) => kv.push([key, fn]);
  add("general.architecture", (o) => { o.u32(T.str); o.str("llama"); });
  add("general.name", (o) => { o.u32(T.str); o.str("vocab-only " + pre); });
  for (const [k, val] of [["context_length", 4096], ["embedding_length", 64], ["block_count", 1],
                          ["feed_forward_length", 128], ["attention.head_count", 1], ["rope.dimension_count", 64]]) {
    add("llama." + k, (o) => { o.u32(T.u32); o.u32(val); });
  }
  add("llama.attention.layer_norm_rms_epsilon", (o) => { o.u32(T.f32); o.f32(1e-5); });
  add("tokenizer.ggml.model", (o) => { o.u32(T.str); o.str("gpt2"); });
  add("tokenizer.ggml.pre", (o) => { o.u32(T.str); o.str(pre); });
  add("tokenizer.ggml.tokens", (o) => { o.u32(T.arr); o.u32(T.str); o.u64(v.tokens.length); for (const t of v.tokens) o.str(t); });
  add("tokenizer.ggml.token_type", (o) => { o.u32(T.arr); o.u32(T.i32); o.u64(v.types.length); for (const t of v.types) o.i32(t); });
  add("tokenizer.ggml.merges", (o) => { o.u32(T.arr); o.u32(T.str); o.u64(v.merges.length); for (const m of v.merges) o.str(m); });
  if (v.bos >= 0) add("tokenizer.ggml.bos_token_id", (o) => { o.u32(T.u32); o.u32(v.bos); });
  if (v.eos >= 0) add("tokenizer.ggml.eos_token_id", (o) => { o.u32(T.u32); o.u32(v.eos); });
  add("tokenizer.ggml.add_bos_token", (o) => { o.u32(T.bool); o.raw(Buffer.from([v.addBos ? 1 : 0])); });
  add("tokenizer.ggml.add_eos_token", (o) => { o.u32(T.bool); o.raw(Buffer.from([v.addEos ? 1 : 0])); });
  const o = new Out();
  o.raw(Buffer.from("GGUF"));
  o.u32(3);
  o.u64(0);
  o.u64(kv.length);
  for (const [key, fn] of kv) { o.str(key); fn(o); }
  let buf = o.buffer();
  const pad = (32 - (buf.length % 32)) % 32;
  buf = Buffer.concat([buf, Buffer.alloc(pad)]);
  fs.writeFileSync(path, buf);
  return buf.length;
}
