// Writes a copy of a GGUF file with `tokenizer.chat_template` set, so the
// end-to-end tests can run a real model (stories260K has no template) with a
// real Jinja chat template. GGUF v2/v3 layout
// (https://github.com/ggerganov/ggml/blob/master/docs/gguf.md): header, key/
// value pairs, tensor infos, padding to `general.alignment` (default 32),
// tensor data. Tensor offsets are relative to the data section, so the data
// is copied unchanged after the new padding.
import { readFileSync, writeFileSync } from 'node:fs';

const kString = 8;
const kArray = 9;
const kScalarSize = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

export function withChatTemplate(srcPath, dstPath, template) {
  const buf = readFileSync(srcPath);
  let pos = 0;
  const u32 = () => { const v = buf.readUInt32LE(pos); pos += 4; return v; };
  const u64 = () => { const v = buf.readBigUInt64LE(pos); pos += 8; return Number(v); };
  const str = () => { const n = u64(); const s = buf.toString('utf8', pos, pos + n); pos += n; return s; };
  const skipValue = (type) => {
    if (type === kString) { str(); return; }
    if (type === kArray) {
      const elem = u32();
      const n = u64();
      for (let i = 0; i < n; ++i) skipValue(elem);
      return;
    }
    if (!(type in kScalarSize)) throw new Error(`GGUF value type ${type} unknown`);
    pos += kScalarSize[type];
  };

  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${srcPath} is not a GGUF file`);
  pos = 4;
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  let alignment = 32;
  const kept = [];  // [start, end) byte ranges of the pairs kept
  for (let i = 0; i < nKv; ++i) {
    const start = pos;
    const key = str();
    const type = u32();
    if (key === 'general.alignment') alignment = buf.readUInt32LE(pos);
    skipValue(type);
    if (key !== 'tokenizer.chat_template') kept.push([start, pos]);
  }
  const infoStart = pos;
  for (let i = 0; i < nTensors; ++i) {
    str();
    const nDims = u32();
    pos += 8 * nDims + 4 + 8;
  }
  const infoEnd = pos;
  const dataStart = Math.ceil(infoEnd / alignment) * alignment;

  const header = Buffer.alloc(24);
  header.write('GGUF', 0, 'latin1');
  header.writeUInt32LE(version, 4);
  header.writeBigUInt64LE(BigInt(nTensors), 8);
  header.writeBigUInt64LE(BigInt(kept.length + 1), 16);
  const key = Buffer.from('tokenizer.chat_template', 'utf8');
  const value = Buffer.from(template, 'utf8');
  const pair = Buffer.alloc(8 + key.length + 4 + 8 + value.length);
  let p = 0;
  pair.writeBigUInt64LE(BigInt(key.length), p); p += 8;
  key.copy(pair, p); p += key.length;
  pair.writeUInt32LE(kString, p); p += 4;
  pair.writeBigUInt64LE(BigInt(value.length), p); p += 8;
  value.copy(pair, p);

  const parts = [header, ...kept.map(([s, e]) => buf.subarray(s, e)), pair, buf.subarray(infoStart, infoEnd)];
  const metaLen = parts.reduce((n, b) => n + b.length, 0);
  const padded = Math.ceil(metaLen / alignment) * alignment;
  parts.push(Buffer.alloc(padded - metaLen), buf.subarray(dataStart));
  writeFileSync(dstPath, Buffer.concat(parts));
}
