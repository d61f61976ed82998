// Constrained decoding end to end with the official openai SDK on
// stories260K: llama.cpp's `grammar` field (passed as an extra body field,
// as llama.cpp's server users do) and response_format json_object. The
// outputs are checked with JSON.parse, not by larder's matcher.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Daemon, modelPath } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let d;
let c;

before(async () => {
  if (!model) return;
  d = await Daemon.start({ model, cacheDir: '' });
  c = new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => { if (d) await d.stop(); });

const record = String.raw`root ::= "{" ws "\"name\":" ws str ws "," ws "\"toys\":" ws "[" ws ( num ( "," ws num ){0,3} )? ws "]" ws "}"
str ::= "\"" [a-zA-Z ]{1,10} "\""
num ::= [0-9]{1,2}
ws ::= " "?`;

test('a GBNF grammar shapes every sampled chat answer into a record JSON.parse reads', { skip }, async () => {
  const names = new Set();
  for (let seed = 1; seed <= 8; seed++) {
    const r = await c.chat.completions.create({
      model: 'stories260K', messages: [{ role: 'user', content: 'Tom and his toys' }],
      temperature: 1, seed, max_tokens: 200, grammar: record,
    });
    const text = r.choices[0].message.content;
    assert.equal(r.choices[0].finish_reason, 'stop', text);
    const doc = JSON.parse(text);
    assert.deepEqual(Object.keys(doc), ['name', 'toys']);
    assert.match(doc.name, /^[a-zA-Z ]{1,10}$/);
    assert.ok(Array.isArray(doc.toys) && doc.toys.length <= 4);
    for (const n of doc.toys) assert.ok(Number.isInteger(n) && n >= 0 && n <= 99);
    names.add(doc.name);
  }
  assert.ok(names.size >= 3, [...names].join('|'));
});

test('streamed, the grammar holds too: the concatenated deltas parse', { skip }, async () => {
  const stream = await c.completions.create({
    model: 'stories260K', prompt: 'Once upon a time', temperature: 1, seed: 3, max_tokens: 200,
    stream: true, grammar: record,
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  assert.deepEqual(Object.keys(JSON.parse(text)), ['name', 'toys']);
});

test('response_format json_object: the answer is a JSON object (or its start, cut by max_tokens)', { skip }, async () => {
  const r = await c.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: 'Describe a cat as JSON' }],
    temperature: 0, max_tokens: 60, response_format: { type: 'json_object' },
  });
  const text = r.choices[0].message.content;
  assert.ok(text.startsWith('{'), text);
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
  else assert.equal(r.choices[0].finish_reason, 'length');
});

test('a grammar that does not parse is a 400 naming the field, before anything runs', { skip }, async () => {
  await assert.rejects(
    c.chat.completions.create({
      model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], grammar: 'root ::= expr\nexpr ::= expr "+" "1"',
    }),
    (e) => e.status === 400 && e.error?.param === 'grammar' && /left-recursive/.test(e.message));
});
