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

import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import Ajv from 'ajv';

const Pet = z.object({
  name: z.string().max(12),
  legs: z.number().int(),
  tags: z.array(z.enum(['small', 'big', 'furry'])).max(3),
  owner: z.object({ name: z.string().max(8) }).nullable(),
});

test('chat.completions.parse with a zod schema returns a parsed object (sampled, several seeds)', { skip }, async () => {
  let parsed = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await c.chat.completions.parse({
      model: 'stories260K', messages: [{ role: 'user', content: 'A pet' }],
      temperature: 1, seed, max_tokens: 300, response_format: zodResponseFormat(Pet, 'pet'),
    });
    const choice = r.choices[0];
    if (choice.finish_reason !== 'stop') continue;  // cut inside an unbounded number
    assert.ok(choice.message.parsed, choice.message.content);
    assert.deepEqual(Object.keys(choice.message.parsed), ['name', 'legs', 'tags', 'owner']);
    Pet.parse(choice.message.parsed);
    parsed++;
  }
  assert.ok(parsed >= 3, `${parsed} of 6 ended within max_tokens`);
});

test('json_schema outputs validate against their schema with ajv (an independent validator)', { skip }, async () => {
  const schema = {
    type: 'object',
    properties: {
      id: { type: 'string', format: 'uuid' },
      when: { type: 'string', format: 'date' },
      score: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
      words: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 1, maxItems: 2 },
      mood: { enum: ['happy', 'sad', 42] },
    },
    required: ['id', 'when', 'words', 'mood'],
    additionalProperties: false,
  };
  const ajv = new Ajv({ allErrors: true });
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  ajv.addFormat('date', /^\d{4}-\d{2}-\d{2}$/);
  const validate = ajv.compile(schema);
  let checked = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await c.completions.create({
      model: 'stories260K', prompt: 'Once upon a time', temperature: 1, seed, max_tokens: 300, json_schema: schema,
    });
    if (r.choices[0].finish_reason !== 'stop') continue;
    const doc = JSON.parse(r.choices[0].text);
    assert.ok(validate(doc), JSON.stringify(validate.errors) + ' ' + r.choices[0].text);
    checked++;
  }
  assert.ok(checked >= 3, `${checked} of 6 ended within max_tokens`);
});

test('a schema keyword the grammar cannot enforce is a 400 naming it', { skip }, async () => {
  await assert.rejects(
    c.chat.completions.create({
      model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(?<=a)b' } } },
    }),
    (e) => e.status === 400 && e.error?.param === 'response_format' && /pattern/.test(e.message) &&
      /lookbehind/.test(e.message));
});

test('a schema of 2000 optional properties constrains the answer (checked by hand); 10001 are a 400', { skip }, async () => {
  const properties = {};
  for (let i = 0; i < 2000; i++) properties[`f${i}`] = i % 2 ? { type: 'boolean' } : { type: 'integer' };
  const schema = { type: 'object', properties, additionalProperties: false };
  // (ajv's code generator overflows the stack on 2000 properties.)
  // The closing brace's token, pushed up where the grammar allows it, so
  // that an answer ends within max_tokens (the tiny model spells each key
  // a character at a time and rarely stops on its own).
  const tok = await fetch(`http://127.0.0.1:${d.port}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ content: '1}' }),
  }).then((r) => r.json());
  const close = tok.tokens[tok.tokens.length - 1];
  let checked = 0;
  for (let seed = 1; seed <= 3; seed++) {
    const r = await c.chat.completions.create({
      model: 'stories260K', messages: [{ role: 'user', content: 'Fields' }], temperature: 1, seed, max_tokens: 120,
      logit_bias: { [close]: 6 }, response_format: { type: 'json_schema', json_schema: { name: 'wide', schema } },
    });
    const text = r.choices[0].message.content;
    if (r.choices[0].finish_reason !== 'stop') continue;
    const doc = JSON.parse(text);
    assert.ok(doc !== null && typeof doc === 'object' && !Array.isArray(doc), text);
    let last = -1;
    for (const [k, v] of Object.entries(doc)) {
      assert.match(k, /^f(0|[1-9][0-9]*)$/, text);
      const i = Number(k.slice(1));
      assert.ok(i > last && i < 2000, text);  // a property of the schema, in schema order
      last = i;
      assert.ok(i % 2 ? typeof v === 'boolean' : Number.isInteger(v), text);
    }
    checked++;
  }
  assert.ok(checked >= 1, `${checked} of 3 ended within max_tokens`);
  for (let i = 2000; i < 10001; i++) properties[`f${i}`] = { type: 'null' };
  await assert.rejects(
    c.chat.completions.create({
      model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }],
      response_format: { type: 'json_schema', json_schema: { name: 'wide', schema } },
    }),
    (e) => e.status === 400 && e.error?.param === 'response_format' && /more than 10000 properties/.test(e.message));
});
