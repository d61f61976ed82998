// End to end with the official openai SDK: n > 1 choices (non-streaming and
// streaming) and a completion with an array of prompts. Each choice j of a
// seeded request must be what an n = 1 request with seed + j gives, and the
// prompt is prefilled once (/metrics). Needs LARDER_BIN and
// LARDER_TEST_MODELS (skips without the model).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Daemon, modelPath } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';

function client(d) {
  return new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });
}

async function metric(d, name) {
  const text = await (await fetch(`http://127.0.0.1:${d.port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

const messages = [{ role: 'user', content: 'Tom the cat went to the park with a red ball and met a dog.' }];
const sampled = { model: 'stories260K', messages, temperature: 1, top_p: 1, max_tokens: 24, seed: 100 };

test('chat n = 3: three choices, each the n = 1 answer of its seed, one prefill', { skip }, async () => {
  const d = await Daemon.start({ model });
  try {
    const c = client(d);
    const prefillBefore = await metric(d, 'larder_prefill_tokens_total');
    const r = await c.chat.completions.create({ ...sampled, n: 3 });
    assert.equal(r.choices.length, 3);
    assert.deepEqual(r.choices.map((ch) => ch.index), [0, 1, 2]);
    for (const ch of r.choices) assert.ok(['stop', 'length'].includes(ch.finish_reason));
    // A cold prompt, prefilled once: its positions counted once, not 3 times.
    assert.equal(await metric(d, 'larder_prefill_tokens_total') - prefillBefore, r.usage.prompt_tokens);
    const singles = [];
    for (let j = 0; j < 3; j++) singles.push(await c.chat.completions.create({ ...sampled, seed: 100 + j }));
    for (let j = 0; j < 3; j++) {
      assert.equal(r.choices[j].message.content, singles[j].choices[0].message.content, `choice ${j}`);
    }
    assert.notEqual(singles[0].choices[0].message.content, singles[1].choices[0].message.content);
    assert.equal(r.usage.prompt_tokens, singles[0].usage.prompt_tokens);
    assert.equal(r.usage.completion_tokens, singles.reduce((s, x) => s + x.usage.completion_tokens, 0));

    // Streaming: every index gets its role chunk, its deltas and one finish chunk.
    const stream = await c.chat.completions.create({
      ...sampled, n: 3, stream: true, stream_options: { include_usage: true } });
    const text = ['', '', ''];
    const finish = [0, 0, 0];
    const role = [0, 0, 0];
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        assert.equal(finish[ch.index], 0, `chunk after choice ${ch.index} finished`);
        if (ch.delta?.role === 'assistant') role[ch.index]++;
        if (ch.delta?.content) text[ch.index] += ch.delta.content;
        if (ch.finish_reason) finish[ch.index]++;
      }
    }
    assert.deepEqual(role, [1, 1, 1]);
    assert.deepEqual(finish, [1, 1, 1]);
    for (let j = 0; j < 3; j++) assert.equal(text[j], singles[j].choices[0].message.content, `streamed choice ${j}`);
    assert.equal(usage.completion_tokens, r.usage.completion_tokens);

    await assert.rejects(c.chat.completions.create({ ...sampled, n: 9 }), (e) => e.status === 400 && e.error?.param === 'n');
  } finally {
    await d.stop();
  }
});

test('completions with 2 prompts x n = 2 run as one batch', { skip }, async () => {
  const d = await Daemon.start({ model });
  try {
    const c = client(d);
    const prompts = ['Once upon a time', 'The little dog'];
    const r = await c.completions.create({ model: 'stories260K', prompt: prompts, n: 2, temperature: 0, max_tokens: 20 });
    assert.equal(r.choices.length, 4);
    assert.deepEqual(r.choices.map((ch) => ch.index), [0, 1, 2, 3]);
    const singles = [];
    for (const p of prompts) singles.push(await c.completions.create({ model: 'stories260K', prompt: p, temperature: 0, max_tokens: 20 }));
    // Choice i * 2 + j is prompt i's; greedy, so both choices of a prompt are its n = 1 answer.
    for (let k = 0; k < 4; k++) assert.equal(r.choices[k].text, singles[Math.floor(k / 2)].choices[0].text, `choice ${k}`);
    assert.notEqual(singles[0].choices[0].text, singles[1].choices[0].text);
    assert.equal(r.usage.prompt_tokens, singles[0].usage.prompt_tokens + singles[1].usage.prompt_tokens);
    assert.equal(r.usage.completion_tokens, 2 * (singles[0].usage.completion_tokens + singles[1].usage.completion_tokens));

    // Token-id prompts too.
    const ids = await c.completions.create({ model: 'stories260K', prompt: [[1, 100, 200], [1, 300]], max_tokens: 3, temperature: 0 });
    assert.deepEqual(ids.choices.map((ch) => ch.index), [0, 1]);
  } finally {
    await d.stop();
  }
});
