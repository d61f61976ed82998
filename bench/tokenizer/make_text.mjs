// Writes the benchmark text: exactly N bytes (default 1,000,000) of UTF-8,
// cut at a character boundary, made deterministically from this repository's
// documentation and C++ sources (English prose, Markdown tables, code) with
// the hard strings of tests/tokenizer/fixtures/bpe_corpus.json (CJK, Arabic,
// emoji and ZWJ sequences, runs of spaces and digits) mixed in after every
// file.
// usage: node make_text.mjs REPO_ROOT OUT.txt [N]
import fs from "node:fs";
import path from "node:path";

const [root, out, nArg] = process.argv.slice(2);
if (!root || !out) {
  console.error("usage: node make_text.mjs REPO_ROOT OUT.txt [N]");
  process.exit(2);
}
const n = Number(nArg ?? 1000000);
const corpus = JSON.parse(fs.readFileSync(path.join(root, "tests/tokenizer/fixtures/bpe_corpus.json"), "utf8"));
const files = [];
const walk = (dir) => {
  for (const e of fs.readdirSync(dir, {withFileTypes: true}).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (/\.(md|cpp|h)$/.test(e.name)) files.push(p);
  }
};
for (const d of ["README.md", "docs", "engine", "api", "storage", "daemon"]) {
  const p = path.join(root, d);
  if (!fs.existsSync(p)) continue;
  if (fs.statSync(p).isDirectory()) walk(p);
  else files.push(p);
}
const parts = [];
let size = 0, k = 0;
while (size < n) {
  for (const f of files) {
    const text = fs.readFileSync(f, "utf8") + "\n" + corpus.join("\n") + "\n";
    parts.push(text);
    size += Buffer.byteLength(text, "utf8");
    if (size >= n) break;
  }
  if (++k > 1000) throw new Error("no input files under " + root);
}
let buf = Buffer.from(parts.join(""), "utf8").subarray(0, n);
while (buf.length > 0 && (buf[buf.length - 1] & 0xc0) === 0x80) buf = buf.subarray(0, buf.length - 1);
if (buf.length > 0 && buf[buf.length - 1] >= 0xc0) buf = buf.subarray(0, buf.length - 1);
fs.writeFileSync(out, buf);
console.error(`${out}: ${buf.length} bytes from ${files.length} files`);
