// End to end with the official openai SDK: speculative decoding by prompt
// lookup ([engine] draft_tokens = 8; off by default), and with a draft model
// as well (--draft-model: stories260K's Q8_0 file drafting for the F32 one),
// gives the same text as a daemon with it off, greedy and seeded sampling,
// streamed or not, and its drafts show in /metrics; a draft model that does
// not fit stops the start with the reason. Needs LARDER_BIN and
// LARDER_TEST_MODELS (skips without the model).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';

const model = modelPath();
const draftModel = model ? modelPath('stories260K-q8_0.gguf') : undefined;
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';

let on, off, drafted, dir, config;
before(async () => {
  if (!model) return;
  dir = tempDir();
  config = join(dir, 'drafts.toml');
  writeFileSync(config, '[engine]\ndraft_tokens = 8\n');
  on = await Daemon.start({ model, extraArgs: ['--config', config] });
  off = await Daemon.start({ model });
  drafted = await Daemon.start({ model, extraArgs: ['--config', config, '--draft-model', draftModel] });
});
after(async () => {
  for (const d of [on, off, drafted]) if (d) await d.stop();
  if (dir) removeDir(dir);
});

const client = (d) => new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });

async function metric(d, name) {
  const text = await (await fetch(`http://127.0.0.1:${d.port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

// reference.json's "newline" prompt: its greedy answer loops, which is what
// prompt lookup drafts from.
const prompt = 'Lily and Ben were playing in the garden.\nSuddenly, they heard a loud noise.';

test('greedy: the same text with drafts as without, and the drafts are counted', { skip }, async () => {
  const before = await metric(on, 'larder_draft_tokens_accepted_total');
  const req = { model: 'stories260K', prompt, max_tokens: 96, temperature: 0 };
  const a = await client(on).completions.create(req);
  const b = await client(off).completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.equal(a.usage.completion_tokens, b.usage.completion_tokens);
  const accepted = await metric(on, 'larder_draft_tokens_accepted_total') - before;
  assert.ok(accepted > 0, `drafts accepted: ${accepted}`);
  assert.ok(await metric(on, 'larder_draft_tokens_total') >= accepted);
  assert.equal(await metric(off, 'larder_draft_tokens_total'), 0);
});

test('seeded sampling, streamed: the same text with drafts as without', { skip }, async () => {
  for (const seed of [1, 2, 3, 4]) {
    const req = { model: 'stories260K', prompt, max_tokens: 64, temperature: 0.9, top_p: 0.95, seed, stream: true };
    const texts = [];
    for (const d of [on, off]) {
      let text = '';
      for await (const chunk of await client(d).completions.create(req)) text += chunk.choices[0]?.text ?? '';
      texts.push(text);
    }
    assert.equal(texts[0], texts[1], `seed ${seed}`);
  }
});

test('a draft model: the same text as without, greedy and seeded chat, and its drafts counted', { skip }, async () => {
  const before = await metric(drafted, 'larder_draft_model_tokens_accepted_total');
  const req = { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 64, temperature: 0 };
  const a = await client(drafted).completions.create(req);
  const b = await client(off).completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const accepted = await metric(drafted, 'larder_draft_model_tokens_accepted_total') - before;
  // stories260K's Q8_0 file picks the F32 file's greedy token at every step
  // of these answers (tests/engine/draft_model_test.cpp).
  assert.ok(accepted > 10, `draft-model tokens accepted: ${accepted}`);
  assert.ok(await metric(drafted, 'larder_draft_model_tokens_total') >= accepted);
  assert.ok(await metric(drafted, 'larder_draft_tokens_total') >= await metric(drafted, 'larder_draft_model_tokens_total'));
  assert.equal(await metric(on, 'larder_draft_model_tokens_total'), 0);
  for (const seed of [5, 6, 7]) {
    const chat = { model: 'stories260K', messages: [{ role: 'user', content: 'Tell me about Lily.' }],
      max_tokens: 48, temperature: 1.0, seed, stream: true };
    const texts = [];
    for (const d of [drafted, off]) {
      let text = '';
      for await (const chunk of await client(d).chat.completions.create(chat)) text += chunk.choices[0]?.delta?.content ?? '';
      texts.push(text);
    }
    assert.equal(texts[0], texts[1], `seed ${seed}`);
  }
});

test('a draft model that does not fit stops the start with the reason', { skip }, async () => {
  const start = (...args) => spawnSync(process.env.LARDER_BIN, ['--model', model, '--port', '0', ...args],
    { timeout: 60000 });
  let r = start('--config', config, '--draft-model', join(dir, 'missing.gguf'));
  assert.notEqual(r.status, 0);
  assert.match(r.stderr.toString(), /missing\.gguf/);
  r = start('--draft-model', draftModel);  // draft_tokens is 0
  assert.notEqual(r.status, 0);
  assert.match(r.stderr.toString(), /draft_tokens is 0/);
});
