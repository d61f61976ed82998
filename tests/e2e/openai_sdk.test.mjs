// End to end with the official openai SDK: streaming chat, cached_tokens on a
// returning chat and after a restart, answers equal to a cold daemon's, error
// bodies, and curl. Needs LARDER_BIN and LARDER_TEST_MODELS (skips without the model).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let cacheDir;

before(() => { if (model) cacheDir = tempDir(); });
after(() => { if (cacheDir) removeDir(cacheDir); });

function client(d) {
  return new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });
}

async function chatStream(c, messages) {
  const stream = await c.chat.completions.create({
    model: 'stories260K', messages, stream: true, stream_options: { include_usage: true },
    temperature: 0, max_tokens: 40,
  });
  let text = '';
  let usage = null;
  let finish = null;
  let roleSeen = false;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      if (ch.delta?.role === 'assistant') roleSeen = true;
      if (ch.delta?.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, usage, finish, roleSeen };
}

const turn1 = [{ role: 'user', content: 'Once upon a time there was a cat named Tom. Tell me what he did one day in the park with his friends.' }];

test('streaming chat, a returning chat hits the cache, and so does one after a restart', { skip }, async () => {
  let d = await Daemon.start({ model, cacheDir });
  let c = client(d);
  const r1 = await chatStream(c, turn1);
  assert.ok(r1.roleSeen, 'first chunk carries the assistant role');
  assert.ok(r1.text.length > 0);
  assert.ok(['stop', 'length'].includes(r1.finish));
  assert.equal(r1.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(r1.usage.total_tokens, r1.usage.prompt_tokens + r1.usage.completion_tokens);

  const turn2 = [...turn1, { role: 'assistant', content: r1.text }, { role: 'user', content: 'What happened next?' }];
  const r2 = await chatStream(c, turn2);
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens > 0, 'second turn reuses the first turn\'s pages');
  // At least turn 1's whole pages (then part of a page up to where the
  // prompts differ); never the whole new prompt.
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= Math.floor(r1.usage.prompt_tokens / 16) * 16);
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens < r2.usage.prompt_tokens);

  assert.equal(await d.stop(), 0, 'SIGTERM ends larderd cleanly');

  d = await Daemon.start({ model, cacheDir });
  c = client(d);
  const turn3 = [...turn2, { role: 'assistant', content: r2.text }, { role: 'user', content: 'And then?' }];
  const r3 = await chatStream(c, turn3);
  assert.ok(r3.usage.prompt_tokens_details.cached_tokens >= r2.usage.prompt_tokens_details.cached_tokens,
    'after a restart the pages come back from RocksDB');
  await d.stop();

  const coldDir = tempDir();
  try {
    const cold = await Daemon.start({ model, cacheDir: coldDir });
    const r3cold = await chatStream(client(cold), turn3);
    await cold.stop();
    assert.equal(r3cold.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(r3.text, r3cold.text, 'restored cache gives the same answer as a cold prefill');
  } finally {
    removeDir(coldDir);
  }
});

test('non-streaming chat and completions through the SDK', { skip }, async () => {
  const d = await Daemon.start({ model });
  try {
    const c = client(d);
    const r = await c.chat.completions.create({ model: 'stories260K', messages: turn1, temperature: 0, max_tokens: 12 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');

    const comp = await c.completions.create({ model: 'stories260K', prompt: 'Once upon a time', temperature: 0, max_tokens: 48 });
    // reference.json (float64 reference implementation), case once_upon:
    assert.equal(comp.choices[0].text, ', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it,');

    const models = await c.models.list();
    assert.equal(models.data[0].id, 'stories260K');

    await assert.rejects(
      c.chat.completions.create({ model: 'no-such-model', messages: turn1 }),
      (e) => e.status === 404 && e.error?.code === 'model_not_found');
    await assert.rejects(
      c.chat.completions.create({ model: 'stories260K', messages: turn1, temperature: 5 }),
      (e) => e.status === 400 && e.error?.param === 'temperature');
    // Still serving.
    const again = await c.chat.completions.create({ model: 'stories260K', messages: turn1, max_tokens: 2 });
    assert.equal(again.usage.completion_tokens, 2);
  } finally {
    await d.stop();
  }
});

test('curl streams SSE ending with [DONE]', { skip }, async () => {
  const d = await Daemon.start({ model });
  try {
    const body = JSON.stringify({ model: 'stories260K', stream: true, max_tokens: 8, messages: turn1 });
    const out = execFileSync('curl', ['-sN', `${d.baseURL}/chat/completions`, '-H', 'Content-Type: application/json', '-d', body]).toString();
    const events = out.split('\n\n').filter((e) => e.startsWith('data: '));
    assert.ok(events.length >= 3);
    assert.equal(events[events.length - 1], 'data: [DONE]');
    const first = JSON.parse(events[0].slice(6));
    assert.equal(first.object, 'chat.completion.chunk');
  } finally {
    await d.stop();
  }
});
