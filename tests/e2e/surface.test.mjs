// End to end with the official openai SDK on stories260K: assistant prefill,
// developer messages, stream_options.include_usage's chunk sequence,
// system_fingerprint, x-request-id, unknown fields, and llama.cpp's
// /tokenize, /detokenize and /apply-template. Token ids were computed by
// llama.cpp (node-llama-cpp 3.21.1's tokenize on the same file).
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
  d = await Daemon.start({ model });
  c = new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => { if (d) await d.stop(); });

async function post(path, body) {
  const r = await fetch(`http://127.0.0.1:${d.port}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json(), id: r.headers.get('x-request-id') };
}

const question = 'Where did the little dog go?';

test('assistant prefill: the answer continues the last assistant message', { skip }, async () => {
  const messages = [{ role: 'user', content: question }, { role: 'assistant', content: 'The little dog went to the' }];
  // The plain format (stories260K has no chat template), written by hand:
  // the prompt ends inside the assistant turn, with no newline after it.
  const prompt = `User: ${question}\nAssistant: The little dog went to the`;
  const applied = await post('/apply-template', { messages });
  assert.equal(applied.status, 200);
  assert.equal(applied.body.prompt, prompt);

  const chat = await c.chat.completions.create({ model: 'stories260K', messages, temperature: 0, max_tokens: 24 });
  const text = await c.completions.create({ model: 'stories260K', prompt, temperature: 0, max_tokens: 24 });
  assert.ok(chat.choices[0].message.content.length > 0);
  assert.equal(chat.choices[0].message.content, text.choices[0].text);
  assert.equal(chat.usage.prompt_tokens, text.usage.prompt_tokens);

  // Without the prefill the answer starts a new turn: another prompt.
  const fresh = await post('/apply-template', { messages: messages.slice(0, 1) });
  assert.equal(fresh.body.prompt, `User: ${question}\nAssistant:`);
});

test('developer messages render as system', { skip }, async () => {
  const r = await post('/apply-template', {
    messages: [{ role: 'developer', content: 'Be kind.' }, { role: 'user', content: 'Hi' }],
  });
  assert.equal(r.status, 200);
  assert.equal(r.body.prompt, 'Be kind.\n\nUser: Hi\nAssistant:');
  const a = await c.chat.completions.create({
    model: 'stories260K', temperature: 0, max_tokens: 8,
    messages: [{ role: 'developer', content: 'Be kind.' }, { role: 'user', content: 'Hi' }],
  });
  const b = await c.chat.completions.create({
    model: 'stories260K', temperature: 0, max_tokens: 8,
    messages: [{ role: 'system', content: 'Be kind.' }, { role: 'user', content: 'Hi' }],
  });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('include_usage: usage null on every chunk, then one choices [] chunk; one system_fingerprint', { skip }, async () => {
  const stream = await c.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: question }], temperature: 0, max_tokens: 12,
    stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 3);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 12);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 12);
  assert.deepEqual(last.usage.completion_tokens_details,
                   { reasoning_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
  for (const chunk of chunks.slice(0, -1)) {
    assert.equal(chunk.usage, null);
    assert.equal(chunk.choices.length, 1);
  }
  const fp = last.system_fingerprint;
  assert.match(fp, /^fp_[0-9a-f]{10}$/);
  for (const chunk of chunks) assert.equal(chunk.system_fingerprint, fp);
  const whole = await c.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: question }], max_tokens: 2,
  });
  assert.equal(whole.system_fingerprint, fp);
});

test('x-request-id on every response, fresh each time', { skip }, async () => {
  const a = await c.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  const b = await c.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  assert.match(a._request_id, /^req_[0-9a-f]{32}$/);
  assert.notEqual(a._request_id, b._request_id);
  const bad = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], temprature: 1 });
  assert.equal(bad.status, 400);
  assert.match(bad.id, /^req_[0-9a-f]{32}$/);
});

test('unknown fields are a 400 naming them; ignored fields pass', { skip }, async () => {
  await assert.rejects(
    c.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], temprature: 1 }),
    (e) => e.status === 400 && e.param === 'temprature' &&
           e.message.includes('Unrecognized request argument supplied: temprature'));
  const ok = await c.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2,
    user: 'u1', metadata: { a: 'b' }, store: false, service_tier: 'auto', prompt_cache_key: 'k', safety_identifier: 's',
  });
  assert.equal(ok.choices.length, 1);
});

test('/tokenize and /detokenize give llama.cpp\'s ids and pieces', { skip }, async () => {
  // node-llama-cpp's model.tokenize('Hello world') on stories260K.
  const hello = [346, 306, 414, 263, 304, 341];
  let r = await post('/tokenize', { content: 'Hello world' });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.tokens, hello);
  r = await post('/tokenize', { content: 'Hello world', add_special: true });
  assert.deepEqual(r.body.tokens, [1, ...hello]);
  // 'á' is C3 A1: "▁" then two byte tokens, pieces as bytes (as in
  // llama.cpp's README example on the same model: 198 -> [195], 164 -> [161]).
  r = await post('/tokenize', { content: 'á', with_pieces: true });
  assert.deepEqual(r.body.tokens, [{ id: 410, piece: ' ' }, { id: 198, piece: [195] }, { id: 164, piece: [161] }]);
  // parse_special (default true): "<s>" is BOS.
  r = await post('/tokenize', { content: '<s>hi' });
  assert.deepEqual(r.body.tokens, [1, 270, 417]);
  r = await post('/tokenize', { content: '<s>hi', parse_special: false });
  assert.notEqual(r.body.tokens[0], 1);

  r = await post('/detokenize', { tokens: [1, ...hello] });
  assert.equal(r.status, 200);
  assert.equal(r.body.content, '<s> Hello world');
  r = await post('/detokenize', { tokens: [512] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, 'tokens[0]');
});
